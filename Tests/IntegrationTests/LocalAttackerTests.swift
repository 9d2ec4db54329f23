import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// SECURITY.md's "local user who can write in DEST", played for real: the test runs as root and
/// the attacker's steps run as `nobody` (setpriv), against a root-run `mirror sync`.
@Suite(.serialized, .enabled(if: geteuid() == 0, "needs root to run the attacker as another user"))
struct LocalAttackerTests {
    static let nobody: uid_t = 65534

    /// Runs `command` (through /bin/sh) as nobody.
    static func asNobody(_ command: String, _ args: [String] = []) throws -> ProcessResult {
        try ChildProcess.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                  "/bin/sh", "-c", command] + args,
                             environment: SyncFixture.loopbackOnly, timeout: 60)
    }

    /// A fixture whose folder nobody can enter, with a DEST anyone may write.
    static func openFixture() throws -> SyncFixture {
        let fx = try SyncFixture(nginx: .init(limitRate: "1m"))
        #expect(chmod(fx.dir.path, 0o755) == 0)
        try FileManager.default.createDirectory(atPath: fx.dest, withIntermediateDirectories: true)
        #expect(chmod(fx.dest, 0o777) == 0)
        return fx
    }

    /// A planted state folder: the attacker runs their own stopped sync of the same manifest,
    /// puts other bytes of the recorded length in its partial file, and swaps their `.mirror` in
    /// for DEST's. Root's sync must not restore the copied hash state over those bytes: it refuses
    /// a `.mirror` it does not own (exit 73, naming it), and once that is removed, ends correct.
    @Test func aPlantedStateFolderWithACopiedRecordIsRefused() throws {
        let fx = try Self.openFixture()
        let sha = try fx.addFile("data.bin", size: 4_000_000, seed: 5)
        try fx.writeManifest()
        let evil = fx.dir.path("evil")
        try FileManager.default.createDirectory(atPath: evil, withIntermediateDirectories: true)
        #expect(chown(evil, Self.nobody, Self.nobody) == 0)

        // A copy of the binary the attacker can run (the build folder may be closed to others).
        let binary = fx.dir.path("mirror")
        try FileManager.default.copyItem(atPath: try MirrorBinary.path(), toPath: binary)
        let own = try Self.asNobody("exec \"$0\" sync \"$1\" --dest \"$2\" --segments 1 --deadline 2s",
                                    [binary, fx.manifestPath, evil])
        #expect(own.exitCode == 75, "\(own)")
        let partial = evil + "/.mirror/partial/" + PartialFile.name(for: "data.bin")
        // Other bytes, same length as the attacker's recorded prefix; then the swap.
        let planted = try Self.asNobody("""
            n=$(stat -c %s "$0") && head -c "$n" /dev/zero | tr '\\0' 'X' > "$0.new" && mv "$0.new" "$0" \
            && chmod 600 "$0" && rm -rf "$1/.mirror" && mv "$2/.mirror" "$1/.mirror"
            """, [partial, fx.dest, evil])
        #expect(planted.exitCode == 0, "\(planted)")

        let refused = try fx.sync(["--segments", "1"])
        #expect(refused.exitCode == 73, "\(refused)")
        // The advice last, with the chown for a DEST another account synced, and the removal.
        #expect(refused.stderr.contains(".mirror: Operation not permitted; it belongs to uid 65534, not to uid \(geteuid()) who runs mirror. "
                                        + "If a run as uid 65534 made it (a DEST synced as root, now by a service account): "
                                        + "chown -R \(geteuid()) \(fx.dest)/.mirror; otherwise remove it. Then run again"), "\(refused.stderr)")
        #expect(!fx.exists(fx.destPath("data.bin")))

        try FileManager.default.removeItem(atPath: fx.dest + "/.mirror")
        let done = try fx.sync(["--segments", "1"])
        #expect(done.exitCode == 0, "\(done)")
        #expect(try TestData.sha256(ofFileAt: fx.destPath("data.bin")) == sha)
    }

    /// A state folder of ours that others may write (a careless chmod) is refused as well, and
    /// so is a journal of another owner.
    @Test func aStateFolderOthersMayWriteIsRefused() throws {
        let fx = try Self.openFixture()
        try fx.addFile("a.bin", size: 1000, seed: 6)
        try fx.writeManifest()
        #expect(try fx.sync().exitCode == 0)
        #expect(chmod(fx.dest + "/.mirror", 0o777) == 0)
        let refused = try fx.sync()
        #expect(refused.exitCode == 73, "\(refused)")
        #expect(refused.stderr.contains("others may write it (mode 777): chmod go-w \(fx.dest)/.mirror, or remove it. Then run again"),
                "\(refused.stderr)")

        #expect(chmod(fx.dest + "/.mirror", 0o755) == 0)
        #expect(chown(fx.dest + "/.mirror/journal", Self.nobody, Self.nobody) == 0)
        let journal = try fx.sync()
        #expect(journal.exitCode == 73, "\(journal)")
        #expect(journal.stderr.contains("journal: Operation not permitted; it belongs to uid 65534"), "\(journal.stderr)")
    }
}
