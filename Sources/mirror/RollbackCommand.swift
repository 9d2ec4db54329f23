import ArgumentParser
import MirrorCore

struct RollbackCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollback",
        abstract: "Point an atomic destination back at its previous complete set.",
        discussion: """
            For a DEST synced with `mirror sync --atomic`: switches DEST, in one rename, to the \
            newest complete generation older than the current one (DEST.generations/gN). A process \
            that opened DEST before keeps reading the set it opened. The next sync builds a new \
            generation from the set DEST then holds.

            The lock is taken first and the current generation read after it: a rollback that \
            waited behind a publishing sync goes back from what that sync published.

            Exit codes: 0 switched; 1 DEST is not atomic or keeps no earlier generation; 73 DEST \
            cannot be changed; 75 a sync holds DEST's lock (see --wait).
            """
    )

    @Option(name: .long, help: ArgumentHelp("The atomic destination folder.", valueName: "DIR"))
    var dest: String

    @Flag(name: .long, help: "Wait for a sync on the same destination to finish instead of exiting 75.")
    var wait = false

    func run() throws {
        do {
            let (from, to) = try Rollback.run(destination: dest, wait: wait)
            print("\(dest): generation \(to) (was \(from))")
        } catch {
            ConsoleReport(mode: .text).fatal(error.description)
            throw ExitCode(error.exitStatus)
        }
    }
}
