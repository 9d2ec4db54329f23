import MirrorCore
import MirrorFS
import MirrorState
import MirrorTestSupport

/// A real destination folder with its `.mirror`, partial folder and journal, for the tests of the
/// parts that decide from them (planner, reconciler, installer). Removed with the value.
struct DestinationState {
    let dir: TemporaryDirectory
    let destination: Destination
    let state: FileDescriptor
    let partials: FileDescriptor
    let journal: Journal

    init() throws {
        dir = try TemporaryDirectory()
        destination = try Destination.create(dir.path)
        guard let state = try destination.stateFolder(create: true),
              let partials = try destination.stateFolder("partial", create: true) else {
            throw HarnessError("cannot create .mirror in \(dir.path)")
        }
        self.state = state
        self.partials = partials
        journal = try Journal(folder: state, displayPath: "journal", readOnly: false)
    }

    var planner: Planner { Planner(destination: destination, journal: journal, partialFolder: partials) }
}
