import MirrorKit
#if canImport(Glibc)
import Glibc
#endif

/// A single status line redrawn in place on a terminal, and erased when the work ends.
///
/// Drawn only when the stream is a terminal (`isatty(3)`): in cron mail or a pipe, a line full of
/// carriage returns is noise. Redraws are limited to 10 a second, and each one clears the line
/// with `CR` + `ESC [ K` (ECMA-48 "erase in line") so a shorter text leaves no remains, and is cut
/// to the terminal's width (`TIOCGWINSZ`) so it never wraps into a second line that `CR` cannot reach.
public final class ProgressLine {
    public let isEnabled: Bool
    private let stream: UnsafeMutablePointer<FILE>
    private let fd: Int32
    private var lastDraw = -Double.infinity
    private var drawn = false
    private let lock = Lock()

    /// - Parameter enabled: false to stay silent (for `--json`), whatever the stream is.
    public init(stream: UnsafeMutablePointer<FILE> = StandardStreams.output, enabled: Bool = true) {
        self.stream = stream
        fd = fileno(stream)
        isEnabled = enabled && isatty(fd) == 1
    }

    /// Redraws with `text`, unless the last redraw was less than 0.1 s ago.
    public func update(_ text: @autoclosure () -> String) {
        guard isEnabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let now = monotonicSeconds()
        guard now - lastDraw >= 0.1 else { return }
        lastDraw = now
        var line = Formatting.printable(text())  // it names files: no control may reach the terminal raw
        let width = ProgressDisplay.terminalWidth(fd: fd)
        if line.count >= width { line = String(line.prefix(max(0, width - 1))) }
        fputs("\r\u{1B}[K" + line, stream)
        fflush(stream)
        drawn = true
    }

    /// Erases the line, leaving the cursor at the start of an empty line.
    public func clear() {
        guard isEnabled else { return }
        lock.lock()
        defer { lock.unlock() }
        if drawn {
            fputs("\r\u{1B}[K", stream)
            fflush(stream)
            drawn = false
        }
    }
}
