import MirrorTestSupport

/// The loop of a random walk (``SequenceTests``, ``OptionWalkTests``): each step returns the
/// invariants it broke; a hang of `mirror` and the test's own trouble are told apart from a
/// broken invariant. Returns the steps done and, when one broke something, its number and what.
enum WalkSteps {
    static func run(_ steps: Int, _ step: (Int) throws -> [String]) -> (done: Int, failed: (step: Int, problems: [String])?) {
        for number in 1...max(1, steps) {
            let problems: [String]
            do {
                problems = try step(number)
            } catch let error as ProcessTimeoutError {
                problems = ["a run outlived its time limit (a hang of mirror): \(error)"]
            } catch {
                problems = ["the step failed (the test's own trouble, not an invariant): \(error)"]
            }
            if !problems.isEmpty { return (number, (number, problems)) }
        }
        return (max(1, steps), nil)
    }
}
