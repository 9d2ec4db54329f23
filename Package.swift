// swift-tools-version:6.0
import PackageDescription

/// `mirror`: keeps a directory in sync with a checksummed manifest over unreliable networks.
///
/// The library is layered, each target using only those below it, so that the compiler refuses a
/// use that goes up (README.md, "Layout"):
///
/// - `MirrorKit`: threads, locks, clocks, byte counts, formatting, redaction, crash points, the
///   stop signal. Needs nothing of mirror.
/// - `MirrorFS`: DEST on disk: descriptors, paths opened without following links, atomic
///   replacement, the generations of an atomic DEST. Uses MirrorKit.
/// - `MirrorModel`: what a run reads and checks, without the network, the journal or the run: the
///   manifest (libyaml, the entries, paths as bytes, the writer), its signature (Ed25519), digests,
///   and the data of a chunk delta (the index, the chunker, the plan). Uses MirrorKit and MirrorFS.
/// - `MirrorState`: what a run leaves in `DEST/.mirror/` for the next: the journal (its records,
///   compaction and recovery, its one writer), the verified index, the destination lock and the
///   journal's reserve. Uses MirrorModel and those below it.
/// - `MirrorCore`: everything else (plan, policies, transfers, the sync, reports, status, verify).
///   Uses all of the above.
/// - `mirror`: the executable, argument parsing and exit codes.
///
/// What a target offers the ones above it but not the library's users is `package`, not `public`.
/// Every target, the tests included, compiles in Swift 6 language mode (full data-race checking).
///
/// The C libraries are system libraries found through pkg-config; `scripts/setup` installs their
/// Debian packages. Each has a tiny module map and a header shim (see `Sources/C*/shim.h`).
let package = Package(
    name: "mirror",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "mirror", targets: ["mirror"]),
        .library(name: "MirrorCore", targets: ["MirrorCore", "MirrorKit", "MirrorFS", "MirrorModel", "MirrorState"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Metalink files (RFC 5854) are XML: read with libxml2's streaming reader, no DTD, no entities.
        .systemLibrary(name: "CXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        // Header-only: Linux system calls Swift's Glibc module does not expose (syncfs, openat2).
        .systemLibrary(name: "CLinux"),
        // Header-only: the commit `scripts/package` builds from, for `mirror --version` (a C
        // define is the one way SwiftPM passes a string into a build; see its header).
        .systemLibrary(name: "CBuildInfo"),
        .target(
            name: "MirrorKit",
            dependencies: ["CLinux"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "MirrorFS",
            dependencies: ["MirrorKit", "CLinux"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "MirrorModel",
            dependencies: ["MirrorKit", "MirrorFS", "CYAML", "COpenSSL", "CZlib", "CXML2", "CLinux"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "MirrorState",
            dependencies: ["MirrorKit", "MirrorFS", "MirrorModel", "CZlib"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "MirrorCore",
            dependencies: ["MirrorKit", "MirrorFS", "MirrorModel", "MirrorState", "CCurl", "CLinux"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "mirror",
            dependencies: [
                "MirrorCore",
                "MirrorKit",
                "MirrorFS",
                "MirrorModel",
                "CBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "MirrorTestSupport",
            dependencies: ["MirrorCore", "MirrorKit", "MirrorModel"],
            path: "Tests/MirrorTestSupport",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // bench/wan's distant link: the tests' LinkProxy as a program (bench/linkproxy/main.swift).
        .executableTarget(
            name: "linkproxy",
            dependencies: ["MirrorTestSupport"],
            path: "bench/linkproxy",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "MirrorCoreTests",
            dependencies: ["MirrorCore", "MirrorKit", "MirrorFS", "MirrorModel", "MirrorState", "MirrorTestSupport"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["MirrorCore", "MirrorKit", "MirrorFS", "MirrorModel", "MirrorState", "MirrorTestSupport", "mirror"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
