import Foundation
import MirrorTestSupport

/// One `mirror sync` of ``OptionWalk``, drawn before it starts: the version, the filter, every
/// other option, and what the checks need to know of them.
struct OptionRun {
    enum Deleting: String { case none, delete, unlisted, excluded }
    /// `right`: a new publish, signed, with a serial above every earlier one; `wrongSignature`:
    /// another manifest's signature, or `--keyring` alone (which checks no YAML manifest): refused
    /// with nothing changed; `rollback`: a
    /// manifest signed earlier with a serial below one DEST surely accepted, which must be
    /// refused (docs/signing.md, "Versions").
    enum Trust { case none, right, wrongSignature, rollback }

    var version: Int
    var filter: Int
    var deleting: Deleting
    /// `--max-delete 100%`: without it the default 50 % guardrail may refuse (exit 1, nothing deleted).
    var unlimited: Bool
    var dryRun = false
    var trust = Trust.none
    /// The serial of a `right` or `rollback` run's manifest (``OptionWorld/signedPath(_:)``).
    var serial: Int?
    var json = false
    var quiet = false
    var metricsFile: String?
    var logFile: String?
    var args: [String] = []

    /// Every option of `mirror sync --help` the walk never draws, and why: the coverage test
    /// (``OptionWalkTests/theWalkDrawsEverySyncOption()``) fails for any other option missing.
    static let notDrawn: [String: String] = [
        "--help": "prints the help and exits; UsageErrorTests read it",
        "-h": "the same as --help",
        "--version": "prints the version and exits; changes nothing",
    ]

    /// Draws a run of `version` (the walk picks it). `atomic`: the DEST is atomic (or is to be
    /// converted), so `--atomic` goes with every run. `waiting`: a run that waits for the lock.
    static func draw(_ rng: inout SeededRandom, world: OptionWorld, version: Int, atomic: Bool, waiting: Bool = false) -> OptionRun {
        let filter = rng.chance(0.45) ? 0 : 1 + rng.below(world.filters.count - 1)
        var deleting: Deleting = rng.chance(0.55) ? .none : [Deleting.delete, .unlisted, .excluded][rng.below(3)]
        // --delete-excluded deletes what a filter leaves out: it needs one.
        if deleting == .excluded && filter == 0 { deleting = .delete }
        var run = OptionRun(version: version, filter: filter, deleting: deleting, unlimited: rng.chance(0.8))
        var args = ["sync", world.manifestPath(version), "--dest", world.dest]
        args += world.filters[filter].args
        switch deleting {
        case .none: break
        case .delete: args.append("--delete")
        case .unlisted: args.append("--delete-unlisted")
        case .excluded: args.append("--delete-excluded")
        }
        if deleting != .none || atomic { args += run.unlimited ? ["--max-delete", "100%"] : rng.chance(0.5) ? ["--max-delete", "3"] : [] }
        if atomic {
            args.append("--atomic")
            if rng.chance(0.3) { args += ["--keep", String(rng.inRange(1...3))] }
        }
        if rng.chance(0.4) { args += ["--segments", String(rng.pick([2, 4, 8])), "--segments-above", rng.pick(["1M", "512K"])] }
        args += ["--jobs", String(rng.pick([1, 2, 4, 8, 64]))]
        if rng.chance(0.3) { args += ["--connections", String(rng.pick([1, 2, 16]))] }
        if rng.chance(0.3) { args += ["--transfer-threads", String(rng.pick([1, 2, 3]))] }
        if rng.chance(0.3) { args += ["--retries", String(rng.inRange(0...3))] }
        if rng.chance(0.25) { args += ["--stall-timeout", rng.pick(["10s", "1m"])] }
        if rng.chance(0.2) { args += ["--limit-rate", rng.pick(["50M", "00:00,40M 12:00,60M", "06:00,80M 18:00,off"])] }
        if rng.chance(0.2) { args += ["--jitter", rng.pick(["0", "20ms"])] }
        if rng.chance(0.2) { args += ["--seed", world.seedFolder] }
        if rng.chance(0.2) { args += ["--prefer", world.fx.server.baseURL + "v\(version)/"] }
        if rng.chance(0.15) { args += ["--ca-file", world.caFile] }
        if rng.chance(0.15) { args += ["--netrc-file", world.netrc] }
        if rng.chance(0.15) { args += ["--auth-header-env", "MIRROR_WALK_AUTH"] }
        if rng.chance(0.3) {
            run.trust = rng.chance(0.9) ? .right : .wrongSignature
            if run.trust == .right && world.surelyAccepted > 1 && rng.chance(0.15) { run.trust = .rollback }
            args += ["--trust", world.publicKey]
            switch run.trust {
            case .wrongSignature where rng.chance(0.5):
                // A YAML manifest with only --keyring, which checks OpenPGP-signed lists: refused too.
                args.removeLast(2)
                args += ["--keyring", world.keyring]
            case .wrongSignature:
                args += ["--signature", world.manifestPath((version + 1) % OptionWorld.versionCount) + ".sig"]
            case .right:
                // A new publish of this version: the walk makes and signs it before the run.
                let serial = world.nextSerial()
                run.serial = serial
                args[1] = world.signedPath(serial)
                if rng.chance(0.5) { args += ["--signature", world.signedPath(serial) + ".sig"] }
            case .rollback:
                let serial = 1 + rng.below(world.surelyAccepted - 1)
                run.serial = serial
                args[1] = world.signedPath(serial)
            case .none:
                break
            }
        }
        switch rng.below(5) {
        case 0: run.json = true; args.append("--json")
        case 1: run.quiet = true; args.append("--quiet")
        case 2: args.append("--summary")
        default: break
        }
        if rng.chance(0.3) { run.metricsFile = world.fx.dir.path("walk.prom"); args += ["--metrics-file", run.metricsFile!] }
        if rng.chance(0.3) { run.logFile = world.fx.dir.path("walk.log"); args += ["--log-file", run.logFile!] }
        if waiting { args.append("--wait") }
        if !waiting && rng.chance(0.08) {
            run.dryRun = true
            args.append("--dry-run")
            if rng.chance(0.5) { args.append("--itemize") }
        }
        run.args = args
        return run
    }
}
