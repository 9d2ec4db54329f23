/// Long work (a local copy, chunking a file, fetching a chunk index) given up because the `stop`
/// it was handed said so: a signal came or the deadline passed (docs/architecture.md, "The run in
/// a page"). Thrown by work of every layer, caught by the run, which then ends as stopped.
package struct StoppedEarly: Error, Sendable {
    package init() {}
}
