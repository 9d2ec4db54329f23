import MirrorFS
import Testing
@testable import MirrorCore

/// ``HoldPolicy``: facts in, decision out; and ``HoldFile``'s text both ways.
@Suite struct HoldPolicyTests {
    static let v2 = String(repeating: "a", count: 64)
    static let v3 = String(repeating: "b", count: 64)
    static let hold = RollbackHold(generation: 1, from: 2, manifests: [v2])

    @Test func noHoldGoesOn() {
        #expect(HoldPolicy.decide(.init(hold: nil, current: 1, manifestSHA256: Self.v2)) == .none)
    }

    @Test func theManifestRolledBackFromIsHeld() {
        #expect(HoldPolicy.decide(.init(hold: Self.hold, current: 1, manifestSHA256: Self.v2)) == .hold(Self.hold))
        #expect(HoldPolicy.decide(.init(hold: Self.hold, current: 1, manifestSHA256: Self.v2.uppercased())) == .hold(Self.hold))
    }

    @Test func anotherManifestReleases() {
        #expect(HoldPolicy.decide(.init(hold: Self.hold, current: 1, manifestSHA256: Self.v3)) == .release(Self.hold, .otherManifest))
    }

    @Test func aDestinationSwitchedElsewhereReleases() {
        #expect(HoldPolicy.decide(.init(hold: Self.hold, current: 2, manifestSHA256: Self.v2)) == .release(Self.hold, .moved))
        #expect(HoldPolicy.decide(.init(hold: Self.hold, current: nil, manifestSHA256: Self.v2)) == .release(Self.hold, .moved))
    }

    @Test func anUnknownDigestNeverHolds() {
        #expect(HoldPolicy.decide(.init(hold: Self.hold, current: 1, manifestSHA256: nil)) == .release(Self.hold, .unknownManifest))
    }

    @Test func aRollbackHoldsAgainstTheGenerationItLeft() {
        #expect(HoldPolicy.afterRollback(existing: nil, from: 2, to: 1, fromManifest: Self.v2) == Self.hold)
        #expect(HoldPolicy.afterRollback(existing: nil, from: 2, to: 1, fromManifest: nil) == nil)
    }

    @Test func aSecondRollbackKeepsWhatTheFirstHeldAgainst() {
        let first = RollbackHold(generation: 2, from: 3, manifests: [Self.v3])
        #expect(HoldPolicy.afterRollback(existing: first, from: 2, to: 1, fromManifest: Self.v2)
                == RollbackHold(generation: 1, from: 2, manifests: [Self.v3, Self.v2]))
        // A hold at another generation is stale: not carried.
        #expect(HoldPolicy.afterRollback(existing: first, from: 4, to: 1, fromManifest: Self.v2)
                == RollbackHold(generation: 1, from: 4, manifests: [Self.v2]))
    }

    @Test func theHoldFileRoundTrips() {
        let text = HoldFile.formatHold(Self.hold)
        #expect(HoldFile.parseHold(text) == Self.hold)
        #expect(HoldFile.parseHold("mirror-hold 1\ngeneration 1\nfrom 2\n") == nil)
        #expect(HoldFile.parseHold("mirror-hold 1\ngeneration 1\nfrom 2\nmanifest xyz\n") == nil)
        #expect(HoldFile.parseHold("something else\n") == nil)
    }

    @Test func builtFromRoundTripsAndSkipsGarbage() {
        let notes = [1: Self.v2, 3: Self.v3]
        #expect(HoldFile.parseBuiltFrom(HoldFile.formatBuiltFrom(notes)) == notes)
        #expect(HoldFile.parseBuiltFrom("g1 nothex\nx2 \(Self.v2)\ng4 \(Self.v3)\n") == [4: Self.v3])
    }
}
