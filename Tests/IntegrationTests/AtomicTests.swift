import Foundation
import Testing
import MirrorCore
import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `sync --atomic`, `rollback` and generations, against nginx (docs/cli.md, "Atomic destinations").
@Suite(.serialized) struct AtomicTests {
    /// Hashes every path of both versions through one descriptor of DEST, in a loop, as an
    /// application that opens DEST once per job would: each snapshot must be all of v1 or all of v2.
    final class Reader: @unchecked Sendable {
        let dest: String
        let paths: [String]
        let versions: [[String: String]]
        private let lock = NSLock()
        private var stop = false
        private(set) var counts = [0, 0]
        private(set) var mixed: [String] = []
        private(set) var mixedCount = 0
        private var thread: Thread?
        /// Entered while the thread runs: ``finish()`` waits on it.
        private let running = DispatchGroup()

        /// The snapshots taken so far (all of them, mixed ones included).
        var snapshots: Int { lock.withLock { counts[0] + counts[1] + mixedCount } }

        init(dest: String, versions: [[String: String]]) {
            self.dest = dest
            self.versions = versions
            paths = Array(Set(versions.flatMap(\.keys))).sorted()
        }

        func start() {
            running.enter()
            let thread = Thread { [self] in
                while !lock.withLock({ stop }) { snapshot() }
                running.leave()
            }
            self.thread = thread
            thread.start()
        }

        func finish() -> (v1: Int, v2: Int, mixed: Int, examples: [String]) {
            lock.withLock { stop = true }
            running.wait()
            return lock.withLock { (counts[0], counts[1], mixedCount, mixed) }
        }

        private func snapshot() {
            let dir = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            // Not a wait for a state: DEST is not made yet, and the reader's loop, which is what
            // looks at DEST, tries again a millisecond later instead of spinning.
            guard dir >= 0 else { usleep(1000); return }
            defer { close(dir) }
            var seen: [String: String] = [:]
            for path in paths {
                let fd = openat(dir, path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { continue }
                let bytes = (try? FileDescriptor(fd: fd, displayPath: path).readAll()) ?? []
                close(fd)
                seen[path] = TestData.sha256(of: bytes)
            }
            lock.withLock {
                if let v = versions.firstIndex(of: seen) { counts[v] += 1 } else if !seen.isEmpty {
                    mixedCount += 1
                    if mixed.count < 3 { mixed.append(seen.keys.sorted().map { "\($0)=\(seen[$0]?.prefix(8) ?? "")" }.joined(separator: " ")) }
                }
            }
        }
    }

    static func inode(_ path: String) -> (ino: UInt64, links: UInt64)? {
        var st = stat()
        return stat(path, &st) == 0 ? (UInt64(st.st_ino), UInt64(st.st_nlink)) : nil
    }

    /// v1 to v2 (one file replaced, one added, one dropped), once killed mid-run and once to the
    /// end, while a reader hashes DEST in a loop: never a mixed snapshot; after the kill DEST is
    /// all of v1, after completion all of v2, rollback gives v1 again, and the unchanged files
    /// are one inode in both generations.
    @Test func aReaderNeverSeesAMixAndRollbackGivesTheOldSet() throws {
        let fx = try SyncFixture(nginx: .init(limitRate: "2m"))
        var sha: [String: String] = [:]
        for (i, path) in ["clips/a.bin", "clips/b.bin", "notes.txt"].enumerated() {
            sha[path] = try TestData.writeFile(at: fx.www + "/" + path, size: 64 << 10, seed: UInt64(i + 1))
        }
        sha["big.v1"] = try TestData.writeFile(at: fx.www + "/v1/big.bin", size: 2 << 20, seed: 10)
        sha["big.v2"] = try TestData.writeFile(at: fx.www + "/v2/big.bin", size: 8 << 20, seed: 11)
        sha["old.bin"] = try TestData.writeFile(at: fx.www + "/old.bin", size: 32 << 10, seed: 12)
        sha["new.bin"] = try TestData.writeFile(at: fx.www + "/new.bin", size: 32 << 10, seed: 13)
        let base = fx.server.baseURL
        func manifest(_ version: Int) throws -> [String: String] {
            fx.manifest = ManifestBuilder(baseURL: base)
            var expected: [String: String] = [:]
            for path in ["clips/a.bin", "clips/b.bin", "notes.txt"] {
                fx.manifest.add(path: path, size: 64 << 10, sha256: sha[path] ?? "")
                expected[path] = sha[path]
            }
            let big = version == 1 ? (2 << 20, "big.v1", "v1/big.bin") : (8 << 20, "big.v2", "v2/big.bin")
            fx.manifest.add(path: "big.bin", size: Int64(big.0), sha256: sha[big.1] ?? "", url: base + big.2)
            expected["big.bin"] = sha[big.1]
            let extra = version == 1 ? "old.bin" : "new.bin"
            fx.manifest.add(path: extra, size: 32 << 10, sha256: sha[extra] ?? "")
            expected[extra] = sha[extra]
            try fx.writeManifest()
            return expected
        }

        let v1 = try manifest(1)
        let first = try fx.sync(["--atomic"])
        #expect(first.exitCode == 0, "\(first)")
        let v2 = try manifest(2)
        let reader = Reader(dest: fx.dest, versions: [v1, v2])
        reader.start()
        defer { _ = reader.finish() }

        let killed = try fx.startSync(["--segments", "1"])
        // Mid-run: a megabyte of v2's big.bin (8 MiB at 2 MiB/s) in its partial file.
        let partial = fx.dest + ".generations/.mirror/partial/" + PartialFile.name(for: "big.bin")
        try Wait.until("v2's big.bin holds 1 MiB in its partial file or the run ended", timeout: 60) {
            fx.size(of: partial) >= 1 << 20 || !killed.isRunning
        }
        killed.signal(SIGKILL)
        _ = try killed.wait(timeout: 10)
        // The reader looks at DEST as the kill left it: a snapshot begun after the kill ends.
        let atKill = reader.snapshots
        try Wait.until("the reader took two snapshots after the kill", timeout: 30) { reader.snapshots >= atKill + 2 }
        #expect(try Self.snapshot(fx.dest, paths: reader.paths) == v1, "after the kill DEST is not all of v1")

        let done = try fx.sync(["--segments", "1"])
        #expect(done.exitCode == 0, "\(done)")
        let atEnd = reader.snapshots
        try Wait.until("the reader took two snapshots after the run", timeout: 30) { reader.snapshots >= atEnd + 2 }
        let seen = reader.finish()
        print("atomic reader: \(seen.v1) snapshots of v1, \(seen.v2) of v2, \(seen.mixed) mixed")
        #expect(seen.mixed == 0, "mixed snapshots, such as \(seen.examples)")
        #expect(seen.v1 + seen.v2 >= 100, "only \(seen.v1) + \(seen.v2) snapshots")
        #expect(seen.v2 > 0)
        #expect(try Self.snapshot(fx.dest, paths: reader.paths) == v2, "after completion DEST is not all of v2")

        let g1 = fx.dest + ".generations/g1/clips/a.bin", g2 = fx.dest + ".generations/g2/clips/a.bin"
        #expect(Self.inode(g1)?.ino == Self.inode(g2)?.ino && Self.inode(g2)?.links == 2, "an unchanged file takes space twice")

        let status = try Mirror.run(["status", fx.manifestPath, "--dest", fx.dest], timeout: 30)
        #expect(status.stdout.contains("generations: g2 (current), g1"), "\(status)")
        let back = try Mirror.run(["rollback", "--dest", fx.dest], timeout: 30)
        #expect(back.exitCode == 0, "\(back)")
        #expect(try Self.snapshot(fx.dest, paths: reader.paths) == v1, "rollback does not give v1")
    }

    static func snapshot(_ dest: String, paths: [String]) throws -> [String: String] {
        var out: [String: String] = [:]
        for path in paths where FileManager.default.fileExists(atPath: dest + "/" + path) {
            out[path] = try TestData.sha256(ofFileAt: dest + "/" + path)
        }
        return out
    }

    /// A plain DEST synced before becomes atomic with no request, its files linked, not copied;
    /// a later no-op run makes no new generation; files the manifest drops leave with the switch
    /// (listed by the dry run); `--keep 2` keeps two generations; an empty manifest is refused.
    @Test func anExistingDestinationBecomesAtomicWithoutADownload() throws {
        let fx = try SyncFixture()
        for i in 0..<4 { try fx.addFile("f\(i).bin", size: 100_000, seed: UInt64(i)) }
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        let before = Self.inode(fx.destPath("f0.bin"))?.ino
        let requests = try fx.requests(atLeast: 4).count

        let converted = try fx.sync(["--atomic"])
        #expect(converted.exitCode == 0, "\(converted)")
        #expect(try fx.requestsSoFar().count == requests, "converting downloaded again")
        var st = stat()
        #expect(lstat(fx.dest, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK, "DEST is not a symlink")
        #expect(Self.inode(fx.destPath("f0.bin"))?.ino == before, "the file was copied, not moved")
        #expect(Self.inode(fx.dest + ".generations/.mirror/journal") != nil)

        let again = try fx.sync()
        #expect(again.exitCode == 0, "\(again)")
        #expect(!FileManager.default.fileExists(atPath: fx.dest + ".generations/g2"), "a no-op run made a generation")

        // Two more sets, each dropping a file: the dry run lists the drop, the switch is the
        // deletion, and with --keep 2 the first generation goes.
        for (dropped, kept) in [("f3.bin", 3), ("f2.bin", 2)] {
            fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
            for i in 0..<kept { fx.manifest.add(path: "f\(i).bin", size: 100_000, sha256: try TestData.sha256(ofFileAt: fx.www + "/f\(i).bin")) }
            try fx.writeManifest()
            let dry = try fx.sync(["--dry-run"])
            #expect(dry.stdout.contains("delete \(dropped)"), "\(dry)")
            let next = try fx.sync(["--json"])
            #expect(next.exitCode == 0 && next.stdout.contains("\"deleted\":1"), "\(next)")
            #expect(!fx.exists(fx.destPath(dropped)))
        }
        let kept = try FileManager.default.contentsOfDirectory(atPath: fx.dest + ".generations").filter { $0.hasPrefix("g") }.sorted()
        #expect(kept == ["g2", "g3"], "\(kept)")

        fx.manifest = ManifestBuilder(baseURL: fx.server.baseURL)
        try fx.writeManifest()
        let empty = try fx.sync()
        #expect(empty.exitCode == 1 && empty.stderr.contains("lists no files"), "\(empty)")
        #expect(fx.exists(fx.destPath("f0.bin")), "an empty manifest emptied DEST")
    }
}
