import Testing
import MirrorCore
import MirrorFS

/// Whether a file found with an entry's bytes is kept, fixed or copied (``FoundFilePolicy``).
struct FoundFilePolicyTests {
    let policy = FoundFilePolicy(user: 1000)

    func decide(owner: UInt32 = 1000, _ permissions: UInt32, wanted: UInt32 = 0o644) -> FoundFilePolicy.Action {
        policy.decide(.init(owner: owner, permissions: permissions, wanted: wanted))
    }

    @Test func ourFileWithTheEntrysModeIsKept() {
        #expect(decide(0o644) == .keep)
        #expect(decide(0o755, wanted: 0o755) == .keep)
        #expect(decide(0o664, wanted: 0o664) == .keep, "group write the manifest gives")
        #expect(decide(0o666, wanted: 0o666) == .keep)
    }

    @Test func anotherUsersFileIsCopiedWhateverItsMode() {
        #expect(decide(owner: 65534, 0o6777) == .copy(.otherOwner(65534)))
        #expect(decide(owner: 65534, 0o644) == .copy(.otherOwner(65534)), "its owner may chmod it back at any time")
        #expect(decide(owner: 0, 0o444) == .copy(.otherOwner(0)))
        #expect(FoundFilePolicy(user: 0).decide(.init(owner: 1000, permissions: 0o644, wanted: 0o644))
                == .copy(.otherOwner(1000)), "root vouches for root's files only")
    }

    @Test func ourFileOthersMayWriteIsCopied() {
        #expect(decide(0o666) == .copy(.writableByOthers(0o666)))
        #expect(decide(0o646) == .copy(.writableByOthers(0o646)))
        #expect(decide(0o664, wanted: 0o644) == .copy(.writableByOthers(0o664)))
        #expect(decide(0o6777, wanted: 0o755) == .copy(.writableByOthers(0o6777)))
        #expect(decide(0o666, wanted: 0o664) == .copy(.writableByOthers(0o666)), "others, though the group may")
    }

    @Test func ourFileWithOnlyAnotherModeIsFixedInPlace() {
        #expect(decide(0o4755, wanted: 0o755) == .fixInPlace(mode: 0o755, mtime: nil), "setuid cleared")
        #expect(decide(0o2755, wanted: 0o755) == .fixInPlace(mode: 0o755, mtime: nil), "setgid cleared")
        #expect(decide(0o1644) == .fixInPlace(mode: 0o644, mtime: nil), "sticky cleared")
        #expect(decide(0o600) == .fixInPlace(mode: 0o644, mtime: nil))
        #expect(decide(0o755) == .fixInPlace(mode: 0o644, mtime: nil))
        #expect(decide(0o644, wanted: 0o664) == .fixInPlace(mode: 0o664, mtime: nil), "less than the manifest gives")
    }

    @Test func aModeIsNotFixedThroughAnInodeWithOtherNames() {
        #expect(policy.decide(.init(owner: 1000, permissions: 0o644, wanted: 0o755, links: 2)) == .copy(.linkedElsewhere(2)),
                "another generation's file would change too")
        #expect(policy.decide(.init(owner: 1000, permissions: 0o644, wanted: 0o644, links: 3)) == .keep,
                "a file shared by generations is kept when nothing changes")
    }

    @Test func aModificationTimeTheManifestGivesIsSetInPlaceOrByACopy() {
        let then = FileTime(seconds: 1_600_000_000), now = FileTime(seconds: 1_700_000_000)
        #expect(policy.decide(.init(owner: 1000, permissions: 0o644, wanted: 0o644, modified: now, wantedModified: then))
                == .fixInPlace(mode: 0o644, mtime: then))
        #expect(policy.decide(.init(owner: 1000, permissions: 0o644, wanted: 0o644, modified: then, wantedModified: then)) == .keep)
        #expect(policy.decide(.init(owner: 1000, permissions: 0o644, wanted: 0o644, modified: now)) == .keep,
                "no mtime in the manifest: the file keeps its own")
        #expect(policy.decide(.init(owner: 1000, permissions: 0o644, wanted: 0o644, links: 2, modified: now, wantedModified: then))
                == .copy(.linkedElsewhere(2)), "a published generation's file would change too")
        #expect(policy.decide(.init(owner: 1000, permissions: 0o600, wanted: 0o644, modified: then, wantedModified: then))
                == .fixInPlace(mode: 0o644, mtime: nil))
    }

    @Test func theFileTypeBitsAreNotPartOfTheMode() {
        #expect(decide(0o100644) == .keep)
        #expect(decide(0o100644, wanted: 0o100644) == .keep)
    }

    @Test func keepsAgreesWithDecide() {
        for owner: UInt32 in [1000, 0, 65534] {
            for permissions: UInt32 in [0o644, 0o755, 0o666, 0o4755, 0o6777, 0o600] {
                for wanted: UInt32 in [0o644, 0o755, 0o666] {
                    let status = FileStatus(size: 1, mode: 0o100000 | permissions, inode: 1, device: 1,
                                            mtime: FileTime(seconds: 0, nanoseconds: 0),
                                            ctime: FileTime(seconds: 0, nanoseconds: 0), owner: owner)
                    let kept = policy.decide(.init(owner: owner, permissions: permissions, wanted: wanted)) == .keep
                    #expect(policy.keeps(status, wanted: wanted) == kept, "\(owner) \(permissions) \(wanted)")
                }
            }
        }
    }
}
