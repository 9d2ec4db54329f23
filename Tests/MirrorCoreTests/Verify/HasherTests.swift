import MirrorModel
import Testing
import MirrorCore

@Suite struct HasherTests {
    /// FIPS 180-4 test vectors ("abc" and the empty message).
    @Test func knownVectors() {
        #expect(Hasher.digest(.sha256, of: Array("abc".utf8)).hex
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Hasher.digest(.sha256, of: []).hex
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Hasher.digest(.sha512, of: Array("abc".utf8)).hex
                == "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f")
    }

    @Test func incrementalEqualsOneShotAndResetStartsOver() {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let h = Hasher(.sha256)
        h.update(Array(bytes[0..<1]))
        h.update(Array(bytes[1..<65_537]))
        h.update(Array(bytes[65_537...]))
        #expect(h.finalize() == Hasher.digest(.sha256, of: bytes))
        h.reset()
        h.update(Array("abc".utf8))
        #expect(h.finalize().hex.hasPrefix("ba7816bf"))
    }

    @Test func digestHexParsing() {
        let upper = String(repeating: "AB", count: 32)
        #expect(Digest(hex: upper, byteCount: 32)?.hex == upper.lowercased())
        #expect(Digest(hex: String(repeating: "ab", count: 31), byteCount: 32) == nil)
        #expect(Digest(hex: String(repeating: "zz", count: 32), byteCount: 32) == nil)
    }
}
