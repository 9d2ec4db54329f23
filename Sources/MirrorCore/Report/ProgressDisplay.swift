import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// What the progress block shows at one moment: a value, so the drawing is a pure function of it.
public struct ProgressSnapshot: Sendable, Equatable {
    public struct File: Sendable, Equatable {
        public var path: String
        public var done: Int64
        public var size: Int64
        /// Requests running for the file: more than one for a segmented download.
        public var connections: Int
        public init(path: String, done: Int64, size: Int64, connections: Int = 1) {
            self.path = path
            self.done = done
            self.size = size
            self.connections = connections
        }
    }

    /// The files being transferred now.
    public var active: [File]
    /// Files of this run that finished (installed or failed) and that it has to fetch in total.
    public var filesDone: Int
    public var filesTotal: Int
    /// Bytes of the files to fetch that are in place (including bytes resumed from earlier runs),
    /// and the sum of their sizes.
    public var bytesDone: Int64
    public var bytesTotal: Int64
    /// Bytes per second over the last few seconds; nil until there is a measurement.
    public var rate: Double?
    /// Why bytes are not moving, when the run waits to retry (``ProgressNote``), above the total.
    public var note: String?

    public init(active: [File], filesDone: Int, filesTotal: Int, bytesDone: Int64, bytesTotal: Int64, rate: Double?,
                note: String? = nil) {
        self.active = active
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.rate = rate
        self.note = note
    }
}

/// Turns a snapshot into the lines of the progress block: one per active file (at most
/// `maxFiles`, then "… and N more"), then the total. No line is wider than `width - 1` columns:
/// a line that wrapped would take two rows and the block could no longer be erased by counting lines.
public enum ProgressRenderer {
    public static func lines(_ s: ProgressSnapshot, width: Int, maxFiles: Int = 6) -> [String] {
        let limit = max(20, width - 1)
        var out: [String] = []
        for file in s.active.prefix(maxFiles) {
            var amount = "\(Formatting.bytes(file.done)) / \(Formatting.bytes(file.size)) \(percent(file.done, file.size))"
            if file.connections > 1 { amount += " (\(file.connections) connections)" }
            let room = limit - amount.count - 4
            out.append("  " + ellipsized(Formatting.printable(file.path), room) + "  " + amount)
        }
        if s.active.count > maxFiles { out.append("  … and \(s.active.count - maxFiles) more") }
        if let note = s.note { out.append("  " + note) }
        var total = "total \(s.filesDone)/\(s.filesTotal) files, \(Formatting.bytes(s.bytesDone)) / "
            + "\(Formatting.bytes(s.bytesTotal)) \(percent(s.bytesDone, s.bytesTotal))"
        // Rate and ETA only when they fit whole: a cut "ETA 1" would mislead.
        if let rate = s.rate {
            let speed = ", \(Formatting.bytes(Int64(rate)))/s"
            if total.count + speed.count <= limit { total += speed }
            let left = s.bytesTotal - s.bytesDone
            let time = ", ETA \(eta(Double(left) / rate))"
            if rate >= 1, left > 0, total.hasSuffix("/s"), total.count + time.count <= limit { total += time }
        }
        out.append(total)
        return out.map { truncated($0, limit) }
    }

    static func percent(_ done: Int64, _ total: Int64) -> String {
        guard total > 0 else { return "100%" }
        return "\(min(100, max(0, done * 100 / total)))%"
    }

    /// `5s`, `2m 05s`, `1h 02m`: whole seconds; an ETA with tenths would flicker.
    static func eta(_ seconds: Double) -> String {
        let s = Int(min(seconds, 359_999).rounded(.up))
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(two(s % 60))s" }
        return "\(s / 3600)h \(two(s % 3600 / 60))m"
    }

    /// Keeps the end of a long path (the file name), which tells files apart better than the start.
    static func ellipsized(_ text: String, _ room: Int) -> String {
        guard text.count > room else { return text }
        guard room > 1 else { return "…" }
        return "…" + text.suffix(room - 1)
    }

    static func truncated(_ text: String, _ limit: Int) -> String {
        text.count > limit ? String(text.prefix(limit)) : text
    }
}

/// Draws the progress block on a terminal and erases it.
///
/// Drawn only when standard output is a terminal (`isatty`) and `TERM` is not `dumb`, in text mode
/// (never with `--quiet`, `--json`, `--dry-run`). It is redrawn from the sync thread's own loop, at
/// most ``minimumInterval`` apart (10 times a second): no thread of its own. Each redraw moves the
/// cursor up over the previous block (`CSI n A`), clears to the end of the screen (`CSI J`) and
/// writes the new block in one `fputs`; ``erase()`` leaves the cursor where the block began, so
/// lines printed afterwards (a "downloaded" line, the summary) take its place and the next redraw
/// appears below them.
public final class ProgressDisplay {
    public static let minimumInterval = 0.1

    private let output: UnsafeMutablePointer<FILE>
    private var linesOnScreen = 0
    private var lastDraw = -1.0
    /// (monotonic time, bytes received) samples of the last few seconds, for the rate.
    private var samples: [(time: Double, bytes: Int64)] = []
    static let rateWindow = 5.0

    public init(output: UnsafeMutablePointer<FILE> = StandardStreams.output) {
        self.output = output
    }

    /// True when a progress display belongs on this standard output.
    public static func wanted(fd: Int32 = STDOUT_FILENO) -> Bool {
        guard isatty(fd) == 1 else { return false }
        if let term = getenv("TERM"), String(cString: term) == "dumb" { return false }
        return true
    }

    /// The terminal's width (`TIOCGWINSZ`), 80 when unknown.
    static func terminalWidth(fd: Int32 = STDOUT_FILENO) -> Int {
        var size = winsize()
        if ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    /// Whether a redraw is due at `now` (monotonic seconds).
    public func isDue(now: Double) -> Bool { now - lastDraw >= ProgressDisplay.minimumInterval }

    /// Records `bytesReceived` (all bytes this run received so far) and returns the rate over the window.
    public func measure(now: Double, bytesReceived: Int64) -> Double? {
        samples.append((now, bytesReceived))
        while let first = samples.first, now - first.time > ProgressDisplay.rateWindow { samples.removeFirst() }
        guard let first = samples.first, now - first.time >= 0.5 else { return nil }
        return Double(bytesReceived - first.bytes) / (now - first.time)
    }

    /// Redraws the block with `snapshot`, unless the last redraw was less than 0.1 s ago.
    public func draw(_ snapshot: ProgressSnapshot, now: Double) {
        guard isDue(now: now) else { return }
        lastDraw = now
        let lines = ProgressRenderer.lines(snapshot, width: ProgressDisplay.terminalWidth())
        var text = eraseSequence()
        for line in lines { text += line + "\n" }
        fputs(text, output)
        fflush(output)
        linesOnScreen = lines.count
    }

    /// Removes the block, leaving the cursor at its first line. Does nothing when none is drawn.
    public func erase() {
        guard linesOnScreen > 0 else { return }
        fputs(eraseSequence(), output)
        fflush(output)
        linesOnScreen = 0
    }

    /// Cursor to column 1, up over the block, clear to the end of the screen.
    private func eraseSequence() -> String {
        linesOnScreen > 0 ? "\r\u{1B}[\(linesOnScreen)A\u{1B}[J" : ""
    }
}
