@testable import MirrorFS
import MirrorState

/// Tests set up journals that describe files they made themselves, with any record the journal
/// can hold. A run appends a `verified` record or a hash-state checkpoint only with the proof its
/// sync returned (``Synced``); a test that builds a journal's state vouches with a proof made for
/// the record's own file, which only a test (`@testable`) can make.
extension JournalWriter {
    func setUp(_ record: JournalRecord, durable: Bool) throws {
        try setUp([record], durable: durable)
    }

    /// A run of `verified` records of one device goes in one append, as an install batch does.
    func setUp(_ records: [JournalRecord], durable: Bool = false) throws {
        var verified: [VerifiedRecord] = []
        func flush() throws {
            guard let device = verified.first?.device else { return }
            try append(verified: verified, proof: Synced(scope: .fileSystem(device: device)))
            verified = []
        }
        for record in records {
            if case .verified(let r) = record, verified.first.map({ $0.device == r.device }) ?? true {
                verified.append(r)
                continue
            }
            try flush()
            switch record {
            case .verified(let r): verified.append(r)
            case .partial(let r) where !r.hashStates.isEmpty && r.fileInode != nil:
                try append(checkpoint: r, proof: Synced(scope: .file(device: 0, inode: r.fileInode ?? 0)))
            case .partial(let r): try append(.partialWithoutStates(r), durable: durable)
            case .forget(let path): try append(.forget(path: path), durable: durable)
            case .removed(let path): try append(.removed(path: path), durable: durable)
            case .failed(let r): try append(.failed(r), durable: durable)
            case .run(let r): try append(.run(r), durable: durable)
            }
        }
        try flush()
    }
}
