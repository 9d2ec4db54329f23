#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MirrorTestSupport

/// The damage steps of ``SequenceWalk``: the journal cut or appended to, a partial download
/// damaged, an installed file changed by hand.
extension SequenceWalk {
    // MARK: - Damage

    /// Cuts the journal's tail at a random byte (usually among its last records, now and then
    /// anywhere) or appends garbage, as a crash mid-write or a bad disk leaves it. A cut can drop
    /// records that were durable, a `forget` among them, and bring back an older record for a
    /// partial file that has since been started again: on purpose, since a record must be bound to
    /// the one file it describes, not to a path, so no lost line can splice a file.
    mutating func damageJournal(_ step: Int) throws {
        let journal = stateFolder + "/journal"
        guard let size = FileDamage.size(of: journal), size > 0 else { return note(step, "journal: none to damage", kind: "journal") }
        if rng.chance(0.6) {
            let length = rng.chance(0.8) ? max(0, size - Int64(rng.inRange(1...400))) : Int64(rng.below(Int(size)))
            try FileDamage.cut(journal, to: length)
            note(step, "journal cut from \(size) to \(length) bytes", kind: "journal")
        } else {
            var garbage = TestData.bytes(count: rng.inRange(1...200), seed: rng.next())
            if rng.chance(0.5) { garbage.append(UInt8(ascii: "\n")) }
            try FileDamage.append(journal, garbage)
            note(step, "journal + \(garbage.count) bytes of garbage", kind: "journal")
        }
        markMaybeFound()
    }

    /// Cuts a partial download short or appends bytes to it, as a crash before a write reached
    /// the disk, or a write the journal never recorded, leaves it.
    mutating func damagePartial(_ step: Int) throws {
        let folder = stateFolder + "/partial"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
        guard !names.isEmpty else { return note(step, "partial: none to damage", kind: "partial") }
        let name = rng.pick(names)
        let path = folder + "/" + name
        guard let size = FileDamage.size(of: path) else { return note(step, "partial: \(name) is gone", kind: "partial") }
        if size > 0 && rng.chance(0.5) {
            let length = Int64(rng.below(Int(size)))
            try FileDamage.cut(path, to: length)
            note(step, "partial \(name) cut from \(size) to \(length)", kind: "partial")
        } else {
            let extra = TestData.bytes(count: rng.inRange(1...(1 << 20)), seed: rng.next())
            try FileDamage.append(path, extra)
            note(step, "partial \(name) (\(size)) + \(extra.count) bytes", kind: "partial")
        }
    }

    /// Changes an installed file behind mirror's back: bytes overwritten in place (same size),
    /// cut short, replaced by a new file, or deleted. The path is exempt from invariant 1 until a
    /// run that lists it exits 0 (a deleted path needs no exemption: nothing is allowed).
    mutating func tamper(_ step: Int) throws {
        let present = world.allPaths.filter { FileDamage.size(of: world.destPath($0)) != nil }
        let path = present.isEmpty ? rng.pick(world.allPaths) : rng.pick(present)
        let target = world.destPath(path)
        // A path that turned: nothing to tamper with where a folder or a file of the other form stands.
        var st = stat()
        if FileDamage.size(of: target) == nil && (lstat(target, &st) == 0 || path.contains("/") && FileDamage.size(of: (target as NSString).deletingLastPathComponent) != nil
                                                   || world.allPaths.contains { path.hasPrefix($0 + "/") && FileDamage.size(of: world.destPath($0)) != nil }) {
            return note(step, "tamper \(path): a turned path stands there", kind: "tamper")
        }
        // The file's times must change for mirror to notice, and Linux stamps files with a clock
        // that ticks every few milliseconds: wait until it has ticked past the file's times.
        try FileClock.waitUntilPastTimes(of: target)
        let size = FileDamage.size(of: target) ?? 0
        switch size == 0 ? 2 : rng.below(4) {
        case 0:
            let count = min(Int(size), rng.inRange(1...4096))
            let offset = Int64(rng.below(Int(size) - count + 1))
            try FileDamage.overwrite(target, at: offset, with: TestData.bytes(count: count, seed: rng.next()))
            note(step, "tamper \(path): \(count) bytes at \(offset) overwritten", kind: "tamper")
        case 1:
            let length = Int64(rng.below(Int(size)))
            try FileDamage.cut(target, to: length)
            note(step, "tamper \(path): cut from \(size) to \(length)", kind: "tamper")
        case 2:
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let bytes = TestData.bytes(count: rng.inRange(0...300_000), seed: rng.next())
            try FileDamage.replace(target, with: bytes)
            note(step, "tamper \(path): replaced by \(bytes.count) other bytes", kind: "tamper")
        default:
            try FileManager.default.removeItem(atPath: target)
            note(step, "tamper \(path): deleted", kind: "tamper")
            // An atomic DEST must show a whole version: a file deleted by hand is exempt too.
            if !disk.isAtomic { return }
        }
        tampered.insert(path)
        // Generations share unchanged files as hard links: a change in place shows in each.
        for n in disk.generations() { generationExempt[n, default: []].insert(path) }
    }
}
