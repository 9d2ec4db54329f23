/// What counts against each limit of a run's transfers, and how the limits are shared among its
/// transfer threads (docs/cli.md, "Files, requests and connections"): facts in (the options and
/// the threads asked for), a decision out, unit-tested without a server
/// (`Tests/MirrorCoreTests/Policy/ConnectionPolicyTests.swift`).
///
/// - **Files in flight** (`--jobs`): entries with a request running or queued at a transfer
///   thread. On a distant link each file costs a round trip, so this is what hides the latency:
///   over HTTP/2 they are streams on one connection, as many as the server allows
///   (`SETTINGS_MAX_CONCURRENT_STREAMS`, RFC 9113 §6.5.2); over HTTP/1.1 those beyond the
///   connections wait at their thread, which starts one the moment a connection is free.
/// - **Connections to one host** (`--connections`): what a server sees, each thread's libcurl
///   limit (`CURLMOPT_MAX_HOST_CONNECTIONS`) being its share, so the run never opens more.
/// - **Segments** (`--segments`): connections one large file may use; each is an HTTP/1.1
///   request on a connection of its own, since streams on one HTTP/2 connection share its window
///   and whatever caps that connection.
public struct ConnectionPolicy: Sendable, Equatable {
    /// `--jobs`: files in flight.
    public var filesInFlight: Int
    /// `--connections`: connections to one host, all threads together.
    public var connectionsPerHost: Int
    /// `--segments`: connections for one large file.
    public var segments: Int
    /// Transfer threads asked for (`--transfer-threads`, or one per two cores).
    public var threadsWanted: Int

    /// The default `--connections`: 16. What one HTTP/1.1 connection per file in flight would open,
    /// bounded where servers start to count a client as abusive (nginx's `limit_conn` examples, and
    /// the 6 to 16 of browsers and download tools: `curl -Z` runs 50 transfers, `wget2` 5 threads,
    /// `aria2c` 16 connections to one server at most); over HTTP/2 a thread needs one or two.
    public static let defaultConnections = 16
    /// The default `--jobs`: 64 files in flight, so a link 60 ms away carries about a thousand
    /// small files a second over HTTP/2 (one round trip each, 64 at once).
    public static let defaultFilesInFlight = 64
    /// The default `--segments`: 8, `aria2c -x8`'s count, which fills a link shaped per connection.
    public static let defaultSegments = 8

    public init(filesInFlight: Int, connectionsPerHost: Int, segments: Int, threadsWanted: Int) {
        self.filesInFlight = max(1, filesInFlight)
        self.connectionsPerHost = max(1, connectionsPerHost)
        self.segments = max(1, segments)
        self.threadsWanted = max(1, threadsWanted)
    }

    /// Transfer threads: as many as asked, but no more than the connections, since each needs at
    /// least one of its own (libcurl keeps connections per multi handle).
    public var threads: Int { min(threadsWanted, connectionsPerHost) }

    /// Each thread's `CURLMOPT_MAX_HOST_CONNECTIONS`: its share of `--connections`, rounded down,
    /// so all threads together stay within it.
    public var connectionsPerThread: Int { max(1, connectionsPerHost / threads) }

    /// Requests the run keeps going at once, every file's together: a file in flight has one, and
    /// a segmented file may widen to `--segments` (``SegmentPolicy``) when no other file takes them.
    public var requests: Int { max(filesInFlight, segments) }

    /// Requests each thread may hand to libcurl at once (its share of ``requests``, rounded up),
    /// the rest waiting, in order, at the thread.
    public var requestsPerThread: Int { (requests + threads - 1) / threads }

    /// How many requests a thread hands to libcurl at once for one host: as many as it has
    /// connections for, unless that host is known to multiplex (a response came over HTTP/2),
    /// then all of its share. A request is never left in libcurl's own queue of transfers waiting
    /// for a connection (`CURLMOPT_MAX_HOST_CONNECTIONS`), where it would count its wait against
    /// its connect timeout; until the first response says what a host speaks, its requests wait
    /// for the first connection (`CURLOPT_PIPEWAIT`) rather than each opening its own.
    public func admits(runningForHost running: Int, multiplexed: Bool) -> Bool {
        running < (multiplexed ? requestsPerThread : connectionsPerThread)
    }

    /// How one request meets the connections.
    public enum Use: Sendable, Equatable {
        /// HTTP/1.1 (`CURLOPT_HTTP_VERSION`), never multiplexed: a segment, whose connection should
        /// add a connection's worth, where streams on one HTTP/2 connection share its flow-control
        /// window and any cap on it.
        case ownConnection
        /// `CURLOPT_PIPEWAIT`: until the first connection to the host says whether it speaks
        /// HTTP/2 (its TLS handshake's ALPN), wait for it rather than open one per request.
        case waitForMultiplexing
        /// Plain HTTP and `file:`: libcurl offers HTTP/2 over TLS only (`CURL_HTTP_VERSION_2TLS`,
        /// its default since 7.62), so there is nothing to wait for.
        case any
    }

    public static func use(segment: Bool, url: String) -> Use {
        if segment { return .ownConnection }
        return url.prefix(8).lowercased() == "https://" ? .waitForMultiplexing : .any
    }

    /// `CURLMOPT_MAX_CONCURRENT_STREAMS` for each thread: every request it may run, so the server's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` is the limit that holds (libcurl's default is 100).
    public var streamsPerConnection: Int { max(100, requestsPerThread) }
}
