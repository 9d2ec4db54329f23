import MirrorKit
import MirrorModel

extension DestinationStatus {
    /// The lines of `status` about the runs and the manifest (docs/cli.md, "mirror status"): the last
    /// run with why it stopped and where its manifest came from, the last run that ended `ok`
    /// and how long ago, and the manifest this status read.
    func runLines(now: Double) -> [String] {
        var lines: [String] = []
        if let interrupted = interruptedRun {
            lines.append("last run: started \(Formatting.utcTimestamp(interrupted.start)) (pid \(interrupted.pid)), interrupted before "
                         + "it ended (killed, or the machine stopped); the next sync goes on from where it left off")
        }
        if let run = lastRun {
            var line = (interruptedRun == nil ? "last run: " : "run before it: ")
                + "\(Formatting.utcTimestamp(run.start)) to \(Formatting.utcTimestamp(run.end)), \(run.result): "
                + "\(run.downloaded) downloaded, \(run.failed) failed, \(Formatting.bytes(run.bytes)) transferred"
            if let source = run.manifest.flatMap(ManifestSource.init(rawValue:)) { line += "; manifest: \(source.words)" }
            lines.append(line)
            if let reason = run.reason { lines.append("  stopped: \(reason)") }
        } else if interruptedRun == nil {
            lines.append(hasJournal ? "last run: none recorded" : "last run: none (no journal in \(destination)/.mirror)")
        }
        if let success = lastSuccess {
            lines.append("last success: \(Formatting.utcTimestamp(success.end)) (\(Formatting.ago(now - Double(success.end))))")
        } else {
            lines.append("last success: none recorded")
        }
        if let manifest { lines.append("manifest: \(manifest.describe(now: now))") }
        if let accepted = acceptedSerial, serialIsSignatureTime {
            lines.append("signed list: signature of \(Formatting.utcTimestamp(accepted.serial)) accepted "
                         + "(--keyring refuses a list signed earlier)")
        } else if let accepted = acceptedSerial {
            var line = "signed manifest: serial \(accepted.serial) accepted (--trust refuses a lower one)"
            if let expires = accepted.expires {
                let when = Formatting.utcTimestamp(expires)
                line += Double(expires) > now ? "; expires \(when) (in \(Formatting.duration(Double(expires) - now)))"
                    : "; expired \(when): a run with --trust refuses it until the publisher signs a new one"
            }
            lines.append(line)
        }
        return lines
    }
}
