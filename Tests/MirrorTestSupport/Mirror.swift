/// Runs the built `mirror` (``MirrorBinary``) as every integration suite does: the real binary in
/// a child process of its own group (``ChildProcess``), with proxies bypassed for loopback, since
/// the tests' servers are on 127.0.0.1 and a proxy set in the environment of the machine that runs
/// them must not stand between.
///
/// Suites keep their own short forms (`fx.sync(["--jobs", "1"])`), each built on these two.
public enum Mirror {
    /// `no_proxy` for loopback, in both spellings libcurl reads.
    public static let loopbackOnly = ["no_proxy": "127.0.0.1,localhost,::1", "NO_PROXY": "127.0.0.1,localhost,::1"]

    /// `mirror ARGS` to its end (a non-zero exit is a result, not an error), killed at `timeout`
    /// seconds.
    ///
    /// - Parameters:
    ///   - environment: added to the test runner's environment (``ChildProcess``), and to
    ///     ``loopbackOnly``, over which it wins.
    ///   - loopbackBypass: false for the tests of proxies and of `no_proxy` itself: then
    ///     ``loopbackOnly`` is not added.
    @discardableResult
    public static func run(_ args: [String], environment: [String: String] = [:], loopbackBypass: Bool = true,
                           cwd: String? = nil, timeout: Double = 120) throws -> ProcessResult {
        try ChildProcess.run(try MirrorBinary.path(), args, environment: merged(environment, loopbackBypass),
                             cwd: cwd, timeout: timeout)
    }

    /// `mirror ARGS`, started and left running; the environment as for ``run(_:environment:loopbackBypass:cwd:timeout:)``.
    public static func start(_ args: [String], environment: [String: String] = [:], loopbackBypass: Bool = true,
                             cwd: String? = nil) throws -> ChildProcess {
        try ChildProcess(try MirrorBinary.path(), args, environment: merged(environment, loopbackBypass), cwd: cwd)
    }

    private static func merged(_ environment: [String: String], _ loopbackBypass: Bool) -> [String: String] {
        loopbackBypass ? loopbackOnly.merging(environment) { $1 } : environment
    }
}
