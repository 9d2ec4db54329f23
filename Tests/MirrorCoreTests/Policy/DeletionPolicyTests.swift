import Testing
import MirrorCore
import MirrorKit

/// Deletion guardrails without a server or a disk (``DeletionPolicy``, ``DeleteLimit``).
struct DeletionPolicyTests {
    func facts(_ candidates: Int, known: Int = 100, listed: Int = 50, complete: Bool = true) -> DeletionPolicy.Facts {
        .init(candidates: candidates, known: known, listed: listed, everyFileVerified: complete)
    }

    @Test func deletesWithinTheLimitAfterACompleteRun() {
        let policy = DeletionPolicy()
        #expect(policy.decide(facts(0)) == .nothing)
        #expect(policy.decide(facts(50)) == .delete, "50 % of 100 is allowed")
        #expect(policy.decide(facts(51)) == .refuseTooMany(candidates: 51, allowed: 50, known: 100))
        #expect(policy.decide(facts(10, complete: false)) == .waitForCompleteRun)
    }

    @Test func anEmptyManifestNeverDeletes() {
        let generous = DeletionPolicy(limit: .percent(100))
        #expect(generous.decide(facts(5, listed: 0)) == .refuseEmptyManifest(candidates: 5))
        #expect(generous.decide(facts(0, listed: 0)) == .nothing, "nothing to delete is not a failure")
        #expect(generous.refusal(.refuseEmptyManifest(candidates: 5))?.contains("lists no files") == true)
    }

    @Test func theLimitIsACountOrAShare() {
        #expect(DeletionPolicy(limit: .count(3)).decide(facts(3, known: 1000)) == .delete)
        #expect(DeletionPolicy(limit: .count(3)).decide(facts(4, known: 1000)) == .refuseTooMany(candidates: 4, allowed: 3, known: 1000))
        #expect(DeletionPolicy(limit: .percent(10)).decide(facts(10, known: 99)) == .refuseTooMany(candidates: 10, allowed: 9, known: 99))
        #expect(DeletionPolicy(limit: .count(0)).decide(facts(1)) == .refuseTooMany(candidates: 1, allowed: 0, known: 100))
    }

    @Test func aRefusalNamesTheCountAndTheWayPast() throws {
        let policy = DeletionPolicy()
        let text = try #require(policy.refusal(policy.decide(facts(90, known: 100))))
        #expect(text.contains("90 of 100 files"))
        #expect(text.contains("--max-delete 50%"))
        #expect(text.contains("--max-delete 90"))
        #expect(policy.refusal(.delete) == nil)
    }

    @Test func limitsParseAsCountsOrPercentages() throws {
        #expect(try DeleteLimit(parsing: "100") == .count(100))
        #expect(try DeleteLimit(parsing: "10%") == .percent(10))
        #expect(try DeleteLimit(parsing: "2.5%") == .percent(2.5))
        #expect(DeleteLimit.default.description == "50%")
        for bad in ["", "-1", "10 %%", "101%", "ten", "1e3", "%"] {
            #expect(throws: ArgumentValueError.notADeleteLimit, "\(bad)") { try DeleteLimit(parsing: bad) }
        }
    }

    /// A run without `--atomic` on an atomic DEST cannot take `--max-delete` alone (a usage
    /// error): the way past the limit names `--atomic` too.
    @Test func theWayPastTheLimitNamesAtomicWhereTheRunLacksIt() throws {
        let decision = DeletionPolicy().decide(facts(60))
        let plain = try #require(DeletionPolicy().refusal(decision))
        #expect(plain.hasSuffix("run again with --max-delete 60 to allow it"), "\(plain)")
        let atomic = try #require(DeletionPolicy(remedyNeedsAtomic: true).refusal(decision))
        #expect(atomic.contains("run again with --atomic --max-delete 60 to allow it (DEST is atomic; --max-delete goes with --atomic)"), "\(atomic)")
    }
}
