import Testing
import MirrorCore

/// What a checksum mismatch leads to, without a server (``MismatchPolicy``).
struct MismatchPolicyTests {
    let policy = MismatchPolicy(attempts: 3)

    func facts(_ failures: Int, revalidated: Bool, same: Bool = false, other: Bool = false, size: Int64 = 10) -> MismatchPolicy.Facts {
        .init(failures: failures, size: size, revalidated: revalidated, sameAsBefore: same, otherSource: other)
    }

    @Test func theFirstMismatchAtAURLIsFollowedByARevalidatingAttemptThere() {
        #expect(policy.decide(facts(1, revalidated: false)) == .revalidate)
        #expect(policy.decide(facts(1, revalidated: false, other: true)) == .revalidate, "before the other sources")
    }

    @Test func afterARevalidatedMismatchComeTheOtherSources() {
        #expect(policy.decide(facts(2, revalidated: true, same: true, other: true)) == .nextSource)
        #expect(policy.decide(facts(2, revalidated: true, same: false, other: true)) == .nextSource)
    }

    @Test func onlyARevalidatedAttemptCanShowTheSourcesOwnContent() {
        #expect(policy.decide(facts(2, revalidated: true, same: true)) == .fail(sameTwice: true))
        #expect(policy.decide(facts(2, revalidated: true, same: false)) == .retry, "damage on the way differs each time")
        #expect(policy.decide(facts(2, revalidated: false, same: true)) == .revalidate,
                "the same wrong digest without revalidation may be a cache's copy")
    }

    @Test func mismatchesAreBoundedAndAnEmptyFileIsNotRetried() {
        #expect(policy.decide(facts(3, revalidated: true, other: true)) == .fail(sameTwice: false))
        #expect(policy.decide(facts(3, revalidated: true, same: true)) == .fail(sameTwice: true))
        #expect(policy.decide(facts(1, revalidated: false, size: 0)) == .fail(sameTwice: false))
    }
}
