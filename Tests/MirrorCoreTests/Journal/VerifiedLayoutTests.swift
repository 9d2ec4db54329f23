@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// Every shape of packed record (``VerifiedIndex/Layout``) comes back as it went in: a device
/// kept as a 16-bit code and one kept whole once the codes run out, a path too long for a 16-bit
/// length, digests raw and as text, each algorithm alone and both, the adopted flag; and the
/// no-op's compare (``VerifiedIndex/matches(path:size:digests:status:movedChangeTime:)``)
/// reads the same fields.
@Suite struct VerifiedLayoutTests {
    static let sha256 = String(repeating: "ab", count: 32)
    static let sha512 = String(repeating: "0f", count: 64)

    static func record(_ path: String, device: UInt64, digests: PerAlgorithm<String> = [.sha256: sha256],
                       adopted: Bool = false) -> VerifiedRecord {
        VerifiedRecord(identity: EntryIdentity(path: path, size: 1 << 40, digests: digests), inode: 0xFEED_0000_0001,
                       device: device, mtime: FileTime(seconds: -5, nanoseconds: 999_999_999),
                       ctime: FileTime(seconds: 1 << 33, nanoseconds: 7), adopted: adopted)
    }

    static func found(_ index: VerifiedIndex, _ path: String) -> VerifiedRecord? {
        var key = path
        return key.withUTF8 { index.record(for: $0) }
    }

    @Test func twoAlgorithmsFitTheFlags() {
        // Bits 1-4 of a record's flags hold two digest fields; a third algorithm needs a new layout.
        #expect(DigestAlgorithm.allCases.count == 2)
    }

    @Test func everyShapeOfRecordComesBackAsItWentIn() {
        var index = VerifiedIndex()
        let long = String(repeating: "deep/", count: 14_000) + "file"  // 70,004 bytes
        let records = [
            Self.record("plain", device: 0x803),
            Self.record("other device", device: UInt64.max),
            Self.record("both", device: 0x803, digests: [.sha256: Self.sha256, .sha512: Self.sha512], adopted: true),
            Self.record("sha512 only", device: 42, digests: [.sha512: Self.sha512]),
            Self.record("as text", device: 42, digests: [.sha256: "NOT-HEX", .sha512: Self.sha512]),
            Self.record(long, device: 0x803, digests: [.sha256: "SHORT"]),
        ]
        for r in records { index.insert(r) }
        for r in records {
            let same = Self.found(index, r.identity.path) == r  // apart: a failure would print the 70 KB path
            #expect(same, "\(r.identity.path.prefix(20))")
        }
        var all: [VerifiedRecord] = []
        index.forEach { all.append($0) }
        #expect(all.count == records.count)
    }

    /// 65,536 devices: the last has no code and is kept whole in its record; all come back.
    @Test func devicesPastTheCodesAreKeptWhole() {
        var index = VerifiedIndex()
        let devices = (0 ..< 65_537).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 }
        for (i, device) in devices.enumerated() { index.insert(Self.record("f\(i)", device: device)) }
        var wrong = 0
        for (i, device) in devices.enumerated() where Self.found(index, "f\(i)")?.device != device { wrong += 1 }
        #expect(wrong == 0)
        let last = devices.count - 1
        let same = Self.found(index, "f\(last)") == Self.record("f\(last)", device: devices[last])
        #expect(same)
    }

    /// The no-op's compare: the same file matches, and a change in any field it reads does not.
    @Test func theNoOpCompareReadsEachField() {
        var index = VerifiedIndex()
        index.insert(Self.record("a", device: 0x803))
        index.insert(Self.record("b", device: 9))
        let digests = DigestSet(.sha256, Digest(hex: Self.sha256, byteCount: 32))
        func status(inode: UInt64 = 0xFEED_0000_0001, device: UInt64 = 0x803, mtimeNanoseconds: Int64 = 999_999_999,
                    ctimeSeconds: Int64 = 1 << 33) -> FileStatus {
            FileStatus(size: 1 << 40, mode: UInt32(S_IFREG) | 0o644, inode: inode, device: device,
                       mtime: FileTime(seconds: -5, nanoseconds: mtimeNanoseconds), ctime: FileTime(seconds: ctimeSeconds, nanoseconds: 7))
        }
        func matches(_ path: String, _ status: FileStatus, movedChangeTime: Bool = false) -> Bool {
            var key = path
            return key.withUTF8 {
                index.matches(path: $0, size: 1 << 40, digests: digests, status: status, movedChangeTime: movedChangeTime)
            }
        }
        #expect(matches("a", status()))
        #expect(matches("b", status(device: 9)))
        #expect(!matches("a", status(device: 9)))
        #expect(!matches("a", status(inode: 2)))
        #expect(!matches("a", status(mtimeNanoseconds: 0)))
        #expect(!matches("a", status(ctimeSeconds: 0)))
        #expect(matches("a", status(ctimeSeconds: 0), movedChangeTime: true))
    }
}
