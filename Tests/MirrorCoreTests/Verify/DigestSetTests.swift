@testable import MirrorModel
import Testing
@testable import MirrorCore
@testable import MirrorFS
import MirrorTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `DigestSet` (one slot per algorithm, fixed order) and `HasherSet` (one hasher per listed
/// algorithm, driven together), on which the sync path, verify and the journal rely.
@Suite struct DigestSetTests {
    static let bytes = TestData.bytes(count: 3 << 20 | 17, seed: 5)

    @Test func slotsIterateInTheAlgorithmsOrder() {
        var set = PerAlgorithm<String>()
        #expect(set.isEmpty && set.algorithms.isEmpty)
        set[.sha512] = "b"
        set[.sha256] = "a"
        #expect(!set.isEmpty)
        #expect(set.algorithms == DigestAlgorithm.allCases)
        #expect(set.map(\.value) == ["a", "b"])
        set[.sha256] = nil
        #expect(set.algorithms == [.sha512])
        #expect(set == [.sha512: "b"])
        #expect(set != [.sha256: "b"])
        #expect(PerAlgorithm(.sha256, nil as String?).isEmpty)
        let one: PerAlgorithm<String> = [.sha256: "x"]
        #expect(one.compactMapValues { _ in nil as Int? }.isEmpty)
        #expect(one.mapValues(\.count) == [.sha256: 1])
    }

    @Test func everyAlgorithmHasItsOwnKeysAndTag() {
        let all = DigestAlgorithm.allCases
        #expect(Set(all.map(\.name)).count == all.count)
        #expect(Set(all.map { $0.journalKey.description }).count == all.count)
        #expect(Set(all.map { $0.stateKey.description }).count == all.count)
        #expect(Set(all.map(\.stateTag)).count == all.count)
        for algorithm in all {
            #expect(DigestAlgorithm.journal(key: Array(algorithm.journalKey.description.utf8)) == algorithm)
            #expect(DigestAlgorithm.journal(key: Array(algorithm.stateKey.description.utf8), state: true) == algorithm)
            #expect(DigestAlgorithm.journal(key: Array(algorithm.stateKey.description.utf8)) == nil)
            #expect(Hasher.digest(algorithm, of: []).bytes.count == algorithm.byteCount)
        }
        #expect(DigestAlgorithm.journal(key: Array("sha25".utf8)) == nil)
    }

    /// Only the listed algorithms are computed, each equal to its one-shot digest.
    @Test func aHasherSetComputesTheListedDigests() {
        for listed in [DigestAlgorithm.allCases, [.sha256], [.sha512]] {
            var expected = DigestSet()
            for algorithm in listed { expected[algorithm] = Hasher.digest(algorithm, of: Self.bytes) }
            let hashers = HasherSet(for: expected)
            Self.bytes.withUnsafeBytes { raw in
                hashers.update(UnsafeRawBufferPointer(rebasing: raw[0..<1000]))
                hashers.update(UnsafeRawBufferPointer(rebasing: raw[1000...]))
            }
            #expect(hashers.finalize() == expected)
        }
    }

    /// Saved states restore all together, or not at all.
    @Test func statesRestoreAllOrNothing() {
        let listed: PerAlgorithm<String> = [.sha256: "", .sha512: ""]
        let first = HasherSet(for: listed)
        let half = Self.bytes.count / 2
        Self.bytes.withUnsafeBytes { first.update(UnsafeRawBufferPointer(rebasing: $0[..<half])) }
        let states = first.savedStates()
        #expect(states.algorithms == DigestAlgorithm.allCases)

        let resumed = HasherSet(for: listed)
        #expect(resumed.restore(states))
        Self.bytes.withUnsafeBytes { resumed.update(UnsafeRawBufferPointer(rebasing: $0[half...])) }
        let whole: DigestSet = [.sha256: Hasher.digest(.sha256, of: Self.bytes), .sha512: Hasher.digest(.sha512, of: Self.bytes)]
        #expect(resumed.finalize() == whole)

        // One state missing, or one not valid: every hasher starts over.
        for broken in [PerAlgorithm(.sha256, states[.sha256]), [.sha256: states[.sha256] ?? "", .sha512: "zz"],
                       [.sha256: states[.sha512] ?? "", .sha512: states[.sha256] ?? ""]] {
            let hashers = HasherSet(for: listed)
            #expect(!hashers.restore(broken))
            Self.bytes.withUnsafeBytes { hashers.update($0) }
            #expect(hashers.finalize() == whole, "started over, so the whole file gives the whole digest")
        }
    }

    @Test func aMismatchNamesTheFirstFailingAlgorithm() throws {
        let d256 = Hasher.digest(.sha256, of: [1]), d512 = Hasher.digest(.sha512, of: [1])
        let other256 = Hasher.digest(.sha256, of: [2]), other512 = Hasher.digest(.sha512, of: [2])
        let entry = ManifestEntry(path: "a", url: .relative("a"), size: 1, digests: [.sha256: d256, .sha512: d512])
        #expect(FileHashing.matches(entry, [.sha256: d256, .sha512: d512]))
        #expect(!FileHashing.matches(entry, [.sha256: d256, .sha512: other512]))
        #expect(!FileHashing.matches(entry, [.sha256: d256]), "a listed digest not computed does not match")
        #expect(FileHashing.mismatchDescription(entry, [.sha256: other256, .sha512: other512])
                == "expected sha256 \(d256.hex), got \(other256.hex)")
        #expect(FileHashing.mismatchDescription(entry, [.sha256: d256, .sha512: other512])
                == "expected sha512 \(d512.hex), got \(other512.hex)")
        #expect(FileHashing.mismatchDescription(entry, [.sha256: d256])
                == "expected sha512 \(d512.hex), got -")
    }

    /// FileHashing hashes a file on disk for exactly the digests an entry lists.
    @Test func aFileOnDiskIsHashedForTheListedDigests() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("f")
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        try #require(fd >= 0)
        let file = FileDescriptor(fd: fd, displayPath: path)
        defer { file.close() }
        try file.append(Self.bytes)
        let d512 = Hasher.digest(.sha512, of: Self.bytes)
        let entry = ManifestEntry(path: "f", url: .relative("f"), size: Int64(Self.bytes.count), digests: [.sha512: d512])
        let computed = try FileHashing.digests(of: file, for: entry)
        #expect(computed == [.sha512: d512])
        #expect(FileHashing.matches(entry, computed))
    }
}
