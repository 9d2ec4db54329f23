import Foundation
import Testing
import MirrorTestSupport

/// The walk over every option (``OptionWalk``), and the check that it draws every option
/// `mirror sync --help` lists.
///
/// `MIRROR_WALK_SEED` replays a walk (the moments a kill lands are the machine's, so a replay is
/// close, not exact); `MIRROR_WALK_STEPS` runs more steps (the longer tier, docs/fuzzing.md);
/// `MIRROR_WALK_MODE=plain|atomic|convert` picks the kind; `MIRROR_WALK_LOG=1` prints every step.
@Suite(.serialized) struct OptionWalkTests {
    static let defaultSteps = 60

    @Test func aWalkOverEveryOptionKeepsEveryInvariant() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["MIRROR_WALK_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64.max)
        let steps = env["MIRROR_WALK_STEPS"].flatMap { Int($0) } ?? Self.defaultSteps
        var walk = try OptionWalk(seed: seed, steps: steps, mode: env["MIRROR_WALK_MODE"].flatMap(OptionWalk.Mode.init(rawValue:)))
        print("option walk: seed \(seed) (\(walk.mode)), \(steps) steps")
        let started = Date()
        let (done, failed) = WalkSteps.run(steps) { try walk.step($0) }
        if let failed {
            Issue.record("""
                option walk failed at step \(failed.step) of \(steps), seed \(seed) (a \(walk.mode.rawValue) walk, converting at \(walk.convertAt))
                replay: MIRROR_WALK_SEED=\(seed) MIRROR_WALK_STEPS=\(steps) MIRROR_WALK_MODE=\(walk.mode.rawValue) swift test --filter OptionWalkTests
                \(failed.problems.joined(separator: "\n"))
                last steps:
                \(walk.log.suffix(30).joined(separator: "\n"))
                """)
        }
        if env["MIRROR_WALK_LOG"] == "1" { print(walk.log.joined(separator: "\n")) }
        print("option walk: seed \(seed) (\(walk.mode)), \(done) of \(steps) steps (\(walk.atomicSteps) atomic, \(walk.filteredSteps) filtered) "
              + "in \(Int(Date().timeIntervalSince(started))) s; steps \(walk.counts.sorted { $0.key < $1.key }); "
              + "options \(walk.optionsUsed.count)")
    }

    /// Every option of `mirror sync --help` is drawn by ``OptionRun/draw(_:world:version:atomic:waiting:)``
    /// (over many draws) or listed in ``OptionRun/notDrawn`` with its reason.
    @Test func theWalkDrawsEverySyncOption() throws {
        let help = try Mirror.run(["sync", "--help"], timeout: 30)
        #expect(help.exitCode == 0, "\(help)")
        var listed = Set<String>()
        // The option lines: they start with the option's name (a wrapped description does not).
        for line in help.stdout.split(separator: "\n") where line.drop(while: { $0 == " " }).hasPrefix("-") {
            for word in line.split(separator: " ").prefix(2) where word.hasPrefix("-") && word.count > 1 {
                let name = word.split(separator: "=").first.map(String.init) ?? String(word)
                let trimmed = name.trimmingCharacters(in: CharacterSet(charactersIn: ",.)"))
                if trimmed.range(of: "^--?[a-z][a-z-]*$", options: .regularExpression) != nil { listed.insert(trimmed) }
            }
        }
        #expect(listed.contains("--atomic") && listed.contains("--delete-excluded"), "the help was not read: \(listed.sorted())")
        var rng = SeededRandom(seed: 7)
        let world = try OptionWorld(rng: &rng)
        var drawn: Set<String> = ["--dest", "--wait", "--deadline", "--atomic"]
        for i in 0..<3000 {
            let run = OptionRun.draw(&rng, world: world, version: i % OptionWorld.versionCount, atomic: i % 2 == 0)
            drawn.formUnion(run.args.filter { $0.hasPrefix("-") }.map { $0.split(separator: "=").first.map(String.init) ?? $0 })
        }
        let missing = listed.subtracting(drawn).subtracting(OptionRun.notDrawn.keys)
        #expect(missing.isEmpty, "options of `mirror sync --help` the walk never draws: \(missing.sorted())")
    }
}
