import MirrorFS
import MirrorModel
import MirrorState
import Testing

/// ``ChangeTimeTrust``: a moved change time is allowed only on a regular file of the running
/// user's that neither group nor others may write (docs/journal.md, "When the change time moves").
struct ChangeTimeTrustTests {
    let trust = ChangeTimeTrust(user: 1000)

    func status(owner: UInt32, mode: UInt32) -> FileStatus {
        FileStatus(size: 1, mode: mode, inode: 2, device: 3, mtime: FileTime(seconds: 4), ctime: FileTime(seconds: 5), owner: owner)
    }

    @Test(arguments: [(UInt32(1000), UInt32(0o100644), true), (1000, 0o100600, true), (1000, 0o100444, true),
                      (1000, 0o100755, true), (1000, 0o100664, false), (1000, 0o100646, false), (1000, 0o100666, false),
                      (0, 0o100644, false), (1001, 0o100644, false), (1000, 0o040755, false), (1000, 0o120777, false)])
    func trustsOnlyThisUsersFileNobodyElseMayWrite(owner: UInt32, mode: UInt32, trusted: Bool) {
        #expect(trust.trustsMovedChangeTime(status(owner: owner, mode: mode)) == trusted,
                "owner \(owner) mode \(String(mode, radix: 8))")
    }

    /// A record matches a moved change time only where the policy trusts it, and never another
    /// inode, size or modification time.
    @Test func aRecordAllowsAMovedChangeTimeOnlyWhereTrusted() {
        let st = status(owner: 1000, mode: 0o100644)
        let record = VerifiedRecord(identity: EntryIdentity(path: "a", size: 1, digests: PerAlgorithm()), status: st)
        var moved = st
        moved.ctime = FileTime(seconds: 9)
        #expect(record.matches(moved, trust: trust))
        #expect(!record.matches(moved, trust: ChangeTimeTrust(user: 7)))
        var other = moved
        other.mtime = FileTime(seconds: 4, nanoseconds: 1)
        #expect(!record.matches(other, trust: trust))
        other = moved
        other.inode = 99
        #expect(!record.matches(other, trust: trust))
    }
}
