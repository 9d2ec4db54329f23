import Testing
@testable import MirrorCore
@testable import MirrorModel

/// An entry's life in a run (``EntryState``), the moves the loop may make and those it may not.
@Suite struct EntryStateTests {
    static let all: [EntryState] = [.ready, .waiting(until: 1), .fetching, .installing, .heldForContent,
                                    .installed, .failed, .leftForLaterRun]

    /// The moves the drawing in EntryState has, and no other.
    @Test func onlyTheDrawnMovesAreAllowed() {
        let drawn: Set<String> = [
            "ready→fetching", "ready→heldForContent",
            "waiting→ready",
            "fetching→ready", "fetching→waiting", "fetching→installing", "fetching→failed",
            "installing→installed", "installing→failed",
            "heldForContent→ready",
        ]
        for from in Self.all {
            for to in Self.all {
                let name = "\(Self.name(from))→\(Self.name(to))"
                let expected = drawn.contains(name) || (!from.isEnded && to == .leftForLaterRun)
                #expect(from.allows(to) == expected, "\(name)")
            }
        }
    }

    /// Installed, failed and left for a later run are ends: an entry counted once stays counted once.
    @Test func anEndedEntryNeverMovesAgain() {
        for end in Self.all where end.isEnded {
            #expect(Self.all.allSatisfy { !end.allows($0) }, "\(end)")
        }
        #expect(Self.all.filter(\.isEnded) == [.installed, .failed, .leftForLaterRun])
    }

    /// A fetching entry is never installed without its bytes verified and queued first, and a
    /// waiting one always goes back to the queue before it fetches again.
    @Test func noStepIsSkipped() {
        #expect(!EntryState.fetching.allows(.installed))
        #expect(!EntryState.waiting(until: 3).allows(.fetching))
        #expect(!EntryState.heldForContent.allows(.fetching))
        #expect(!EntryState.ready.allows(.installing))
    }

    /// A task moves through a whole life, and its back-off time is the waiting state's.
    @Test func aTaskCarriesItsStateAndBackOff() {
        let task = EntryTask(entry: ManifestEntry(path: "a", url: .relative("a"), size: 1, digests: [:]),
                             sources: ["http://127.0.0.1/a"], replacing: false)
        #expect(task.state == .ready && task.notBefore == 0 && !task.isRetired)
        task.move(to: .fetching)
        task.move(to: .waiting(until: 42))
        #expect(task.notBefore == 42)
        task.move(to: .ready)
        task.move(to: .fetching)
        task.move(to: .installing)
        task.move(to: .installed)
        #expect(task.isRetired && task.notBefore == 0)
    }

    static func name(_ state: EntryState) -> String {
        switch state {
        case .waiting: return "waiting"
        default: return "\(state)"
        }
    }
}
