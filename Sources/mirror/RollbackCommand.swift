import ArgumentParser
import MirrorCore

struct RollbackCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollback",
        abstract: "Point an atomic destination back at its previous complete set, and hold it there.",
        discussion: """
            For a DEST synced with `mirror sync --atomic`: switches DEST, in one rename, to the \
            newest complete generation older than the current one (DEST.generations/gN). A process \
            that opened DEST before keeps reading the set it opened.

            The rollback holds: a later sync of the manifest the newer generation was built from \
            changes nothing (it says DEST is held, and exits 0), so the next cron run does not undo \
            it. A sync of any other manifest releases the hold and goes on as usual; so does \
            `mirror rollback --dest DEST --release`, after which a sync of the newer manifest links \
            its files from the kept newer generation instead of downloading them.

            The lock is taken first and the current generation read after it: a rollback that \
            waited behind a publishing sync goes back from what that sync published.

            Exit codes: 0 switched (or, with --release, the hold removed or none there); 1 DEST is \
            not atomic or keeps no earlier generation; 73 DEST cannot be changed; 75 a sync holds \
            DEST's lock (see --wait).
            """
    )

    @Option(name: .long, help: ArgumentHelp("The atomic destination folder.", valueName: "DIR"))
    var dest: String

    @Flag(name: .long, help: "Wait for a sync on the same destination to finish instead of exiting 75.")
    var wait = false

    @Flag(name: .long, help: "Switch nothing: remove the hold a rollback left, so the next sync of any manifest goes on as usual.")
    var release = false

    func run() throws {
        do {
            if release {
                let (current, released) = try Rollback.release(destination: dest, wait: wait)
                print(released ? "\(dest): hold released; generation \(current) stays until the next sync"
                               : "\(dest): not held (generation \(current))")
                return
            }
            let switched = try Rollback.run(destination: dest, wait: wait)
            print("\(dest): generation \(switched.to) (was \(switched.from))")
            if switched.hold != nil {
                print("\(dest): held at generation \(switched.to): a sync of the manifest generation \(switched.from) was built from "
                    + "changes nothing; another manifest, or `\(HoldPolicy.releaseAdvice(dest))`, releases the hold")
            } else {
                ConsoleReport(mode: .text).warning("\(dest): generation \(switched.from) records no manifest (published by an "
                    + "earlier mirror), so nothing holds this rollback: the next sync builds again")
            }
        } catch {
            ConsoleReport(mode: .text).fatal(error.description)
            throw ExitCode(error.exitStatus)
        }
    }
}
