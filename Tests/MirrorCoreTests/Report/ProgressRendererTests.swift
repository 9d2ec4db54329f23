@testable import MirrorModel
import Testing
@testable import MirrorCore

@Suite struct ProgressRendererTests {
    static let mib: Int64 = 1 << 20

    @Test func oneLinePerActiveFileThenTheTotal() {
        let snapshot = ProgressSnapshot(
            active: [.init(path: "a.bin", done: 3 * Self.mib, size: 12 * Self.mib),
                     .init(path: "b/c.bin", done: 0, size: 1000)],
            filesDone: 1, filesTotal: 4, bytesDone: 15 * Self.mib, bytesTotal: 60 * Self.mib, rate: Double(3 * Self.mib))
        let lines = ProgressRenderer.lines(snapshot, width: 120)
        #expect(lines == [
            "  a.bin  3.0 MiB / 12.0 MiB 25%",
            "  b/c.bin  0 B / 1000 B 0%",
            "total 1/4 files, 15.0 MiB / 60.0 MiB 25%, 3.0 MiB/s, ETA 15s",
        ])
    }

    /// A segmented file is one line, however many requests it runs; the line says how many.
    @Test func aSegmentedFileIsOneLineWithItsConnections() {
        let task = EntryTask(entry: ManifestEntry(path: "big.iso", url: .relative("big.iso"), size: 100 * Self.mib, digests: [:]),
                             sources: [], replacing: false)
        let other = EntryTask(entry: ManifestEntry(path: "a.bin", url: .relative("a.bin"), size: 10, digests: [:]),
                              sources: [], replacing: false)
        let files = RunProgress.files([task, other, task, task])
        #expect(files.map(\.path) == ["a.bin", "big.iso"])
        var segmented = files[1]
        segmented.connections = 4
        segmented.done = 36 * Self.mib
        let snapshot = ProgressSnapshot(active: [segmented], filesDone: 0, filesTotal: 1, bytesDone: 0, bytesTotal: 1, rate: nil)
        #expect(ProgressRenderer.lines(snapshot, width: 120).first == "  big.iso  36.0 MiB / 100.0 MiB 36% (4 connections)")
    }

    @Test func noRateMeansNoETAAndAnETAOverAMinuteHasMinutes() {
        var snapshot = ProgressSnapshot(active: [], filesDone: 0, filesTotal: 1, bytesDone: 0, bytesTotal: 100 * Self.mib, rate: nil)
        #expect(ProgressRenderer.lines(snapshot, width: 80) == ["total 0/1 files, 0 B / 100.0 MiB 0%"])
        snapshot.rate = Double(Self.mib)
        #expect(ProgressRenderer.lines(snapshot, width: 80).last == "total 0/1 files, 0 B / 100.0 MiB 0%, 1.0 MiB/s, ETA 1m 40s")
    }

    @Test func linesNeverReachTheTerminalWidthAndLongPathsKeepTheirEnd() {
        let path = String(repeating: "deep/", count: 30) + "the-file-name.iso"
        let snapshot = ProgressSnapshot(active: [.init(path: path, done: 1, size: 2)], filesDone: 0, filesTotal: 1,
                                        bytesDone: 1, bytesTotal: 2, rate: 1)
        let lines = ProgressRenderer.lines(snapshot, width: 60)
        for line in lines { #expect(line.count <= 59, "\(line.count): \(line)") }
        #expect(lines[0].hasPrefix("  …"))
        #expect(lines[0].contains("the-file-name.iso"))
    }

    /// On a narrow terminal the total keeps whole parts: the ETA goes first, then the rate.
    @Test func aNarrowTotalDropsWholePartsNotCharacters() {
        let snapshot = ProgressSnapshot(active: [], filesDone: 4, filesTotal: 5, bytesDone: 105 * Self.mib,
                                        bytesTotal: 148 * Self.mib, rate: Double(31 * Self.mib))
        #expect(ProgressRenderer.lines(snapshot, width: 120) == ["total 4/5 files, 105.0 MiB / 148.0 MiB 70%, 31.0 MiB/s, ETA 2s"])
        #expect(ProgressRenderer.lines(snapshot, width: 60) == ["total 4/5 files, 105.0 MiB / 148.0 MiB 70%, 31.0 MiB/s"])
        #expect(ProgressRenderer.lines(snapshot, width: 50) == ["total 4/5 files, 105.0 MiB / 148.0 MiB 70%"])
    }

    @Test func manyActiveFilesAreCountedNotListed() {
        let files = (0..<10).map { ProgressSnapshot.File(path: "f\($0)", done: 0, size: 1) }
        let lines = ProgressRenderer.lines(ProgressSnapshot(active: files, filesDone: 0, filesTotal: 10, bytesDone: 0,
                                                            bytesTotal: 10, rate: nil), width: 80, maxFiles: 6)
        #expect(lines.count == 8)
        #expect(lines[6] == "  … and 4 more")
        #expect(lines.allSatisfy { !$0.contains("\u{1B}") && !$0.contains("\r") && !$0.contains("\n") })
    }

    @Test func theRateIsMeasuredOverTheWindow() {
        let display = ProgressDisplay()
        #expect(display.measure(now: 100, bytesReceived: 0) == nil)
        #expect(display.measure(now: 101, bytesReceived: 1000) == 1000)
        #expect(display.measure(now: 102, bytesReceived: 4000) == 2000)
        // Samples older than the window are forgotten: the rate follows the recent past.
        #expect(display.measure(now: 110, bytesReceived: 4000) == nil)
        #expect(display.measure(now: 110.5, bytesReceived: 4500) == 1000)
    }
}

/// While files wait after a stall, the block says so above the total.
@Suite struct ProgressNoteTests {
    @Test func theSoonestRetryOfTheStalledFilesIsShown() {
        #expect(ProgressNote.line([], now: 0) == nil)
        #expect(ProgressNote.line([.init(stalled: false, notBefore: 5)], now: 0) == nil, "a back-off after a 503 is not a stall")
        #expect(ProgressNote.line([.init(stalled: true, notBefore: 11.2)], now: 0) == "stalled, retrying in 12 s")
        #expect(ProgressNote.line([.init(stalled: true, notBefore: 9), .init(stalled: true, notBefore: 4), .init(stalled: false, notBefore: 1)],
                                  now: 1) == "2 files stalled, retrying in 3 s")
        let snapshot = ProgressSnapshot(active: [], filesDone: 0, filesTotal: 1, bytesDone: 0, bytesTotal: 1000, rate: nil,
                                        note: "stalled, retrying in 3 s")
        #expect(ProgressRenderer.lines(snapshot, width: 80) == ["  stalled, retrying in 3 s", "total 0/1 files, 0 B / 1000 B 0%"])
    }
}
