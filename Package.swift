// swift-tools-version:6.0
import PackageDescription

/// `mirror`: keeps a directory in sync with a checksummed manifest over unreliable networks.
///
/// The C libraries are system libraries found through pkg-config; `scripts/setup` installs their
/// Debian packages. Each has a tiny module map and a header shim (see `Sources/C*/shim.h`).
let package = Package(
    name: "mirror",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "mirror", targets: ["mirror"]),
        .library(name: "MirrorCore", targets: ["MirrorCore", "MirrorKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Header-only: Linux system calls Swift's Glibc module does not expose (syncfs, openat2).
        .systemLibrary(name: "CLinux"),
        // The lowest layer: threads and locks on pthreads, the clocks, byte counts and rates,
        // formatting, URL redaction, crash points and the stop signal. It needs nothing of mirror.
        .target(
            name: "MirrorKit",
            dependencies: ["CLinux"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        // Everything else, for now: the manifest, the journal, planning, transfers, the sync.
        .target(
            name: "MirrorCore",
            dependencies: ["MirrorKit", "CCurl", "CYAML", "CZlib", "COpenSSL", "CLinux"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(
            name: "mirror",
            dependencies: [
                "MirrorCore",
                "MirrorKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .target(
            name: "MirrorTestSupport",
            dependencies: ["MirrorCore", "MirrorKit"],
            path: "Tests/MirrorTestSupport",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "MirrorCoreTests",
            dependencies: ["MirrorCore", "MirrorKit", "MirrorTestSupport"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["MirrorCore", "MirrorKit", "MirrorTestSupport", "mirror"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
    ]
)
