import CYAML
@testable import MirrorModel
import Testing
@testable import MirrorCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Not a test: measures loading 100,000-entry manifests and prints the times. Runs only when
/// MIRROR_MANIFEST_BENCH is set, in a release build:
///
///     swift build -c release -Xswiftc -enable-testing --build-tests --scratch-path .build-manifest
///     MIRROR_MANIFEST_BENCH=1 .build-manifest/release/mirrorPackageTests.xctest \
///         --testing-library swift-testing --filter manifestLoadBenchmark
///
/// No timing assertion: machines differ; the numbers are for people. "libyaml alone" is the floor:
/// pulling the same events out of libyaml and discarding them.
@Test(.enabled(if: getenv("MIRROR_MANIFEST_BENCH") != nil))
func manifestLoadBenchmark() throws {
    let count = 100_000
    for full in [false, true] {
        let bytes = benchmarkManifest(count: count, allKeys: full)
        var best = (load: Double.infinity, libyaml: Double.infinity)
        for _ in 0 ..< 5 {
            var start = cpuSeconds()
            let manifest = try ManifestLoader.parse(bytes, sourceName: "bench.yaml")
            best.load = min(best.load, cpuSeconds() - start)
            #expect(manifest.entries.count == count)
            start = cpuSeconds()
            #expect(libyamlEventCount(bytes) > count)
            best.libyaml = min(best.libyaml, cpuSeconds() - start)
        }
        let kind = full ? "path, size, sha256, mtime, mode" : "path, size, sha256"
        print("manifest benchmark: \(count) entries (\(kind)), \(bytes.count / 1_000_000) MB: load \(best.load) s,"
              + " libyaml alone \(best.libyaml) s (CPU time, best of 5)")
    }
}

private func benchmarkManifest(count: Int, allKeys: Bool) -> [UInt8] {
    var text = "version: 1\nbase_url: https://media.example.org/lab/\nmirrors:\n  - https://m2.example.org/lab/\nfiles:\n"
    text.reserveCapacity(count * 200)
    for i in 0 ..< count {
        let hex = String(String(repeating: String(i, radix: 16), count: 64).prefix(64))
        text += "  - path: \"datasets/run \(i % 97)/part \(i / 97)/frame-\(i).tar\"\n"
        text += "    size: \(i * 4096 + 17)\n"
        text += "    sha256: \(hex)\n"
        if allKeys {
            text += "    mtime: 2026-11-01T12:00:\(i % 50 + 10).\(i % 1000)Z\n"
            text += "    mode: \"0644\"\n"
        }
    }
    return Array(text.utf8)
}

/// Events libyaml produces for `bytes`, doing nothing with them.
private func libyamlEventCount(_ bytes: [UInt8]) -> Int {
    bytes.withUnsafeBufferPointer { buffer in
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { return 0 }
        defer { yaml_parser_delete(&parser) }
        yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
        var event = yaml_event_t()
        var events = 0
        while yaml_parser_parse(&parser, &event) == 1 {
            let done = event.type == YAML_STREAM_END_EVENT
            yaml_event_delete(&event)
            events += 1
            if done { break }
        }
        return events
    }
}

/// CPU time of the calling thread: steadier than wall time on a busy machine.
private func cpuSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}
