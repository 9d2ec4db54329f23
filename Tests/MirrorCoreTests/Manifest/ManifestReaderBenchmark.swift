@testable import MirrorModel
import Testing
@testable import MirrorCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Not a test: loads one manifest file with one reader, for `bench/manifest-readers`, which runs
/// it under `/usr/bin/time -v` for the peak RSS. Runs only when MIRROR_READER_BENCH names the reader:
///
/// - `events`: libyaml's events, entries built while reading (no whole-document tree);
/// - `scanner`: ``FastManifestScanner`` into a whole tree, then the rules (the reader before streaming);
/// - `scanner-stream`: ``FastManifestScanner``, entries built while reading;
/// - `tree`: libyaml's events into a whole tree, then the rules;
/// - `none`: nothing (the test process's own footprint).
@Test(.enabled(if: getenv("MIRROR_READER_BENCH") != nil))
func manifestReaderBenchmark() throws {
    let mode = String(cString: getenv("MIRROR_READER_BENCH"))
    let path = getenv("MIRROR_READER_BENCH_FILE").map { String(cString: $0) } ?? ""
    let readers: [String: ManifestLoader.Reader] = [
        "events": .init(fastPath: false, streaming: true), "scanner": .init(fastPath: true, streaming: false),
        "scanner-stream": .init(fastPath: true, streaming: true), "tree": .init(fastPath: false, streaming: false),
    ]
    var start = timespec(), end = timespec(), cpuStart = timespec(), cpuEnd = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpuStart)
    var count = 0
    if let reader = readers[mode] {
        count = try ManifestLoader.load(path: path, reader: reader).entries.count
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpuEnd)
    clock_gettime(CLOCK_MONOTONIC, &end)
    func seconds(_ a: timespec, _ b: timespec) -> Double { Double(b.tv_sec - a.tv_sec) + Double(b.tv_nsec - a.tv_nsec) / 1e9 }
    print("manifest reader \(mode): \(count) entries, load \(seconds(start, end)) s, cpu \(seconds(cpuStart, cpuEnd)) s")
}
