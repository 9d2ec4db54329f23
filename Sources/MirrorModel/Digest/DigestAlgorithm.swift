import COpenSSL

/// A digest algorithm a manifest entry may list, with everything the rest of the program needs
/// to know about it: its name, its length, its keys in the journal and its libcrypto calls.
///
/// Adding an algorithm means a case here (and a slot in ``PerAlgorithm``) and a key in the
/// manifest rule (`ManifestRules.EntryKey`); hashing, verifying, the journal and the sync path
/// handle every case generically. (`mirror verify --json` names its fields per algorithm,
/// `expected_sha256` and so on, in `VerifyProblem`: an output contract, extended on purpose.)
/// Cases are declared in the order digests are written to and compared in the journal
/// (docs/journal.md): reordering them would change the journal's bytes.
public enum DigestAlgorithm: Int, Sendable, CaseIterable {
    case sha256, sha512

    /// The name in the manifest, in messages (`expected sha256 ..., got ...`) and in `mirror verify`'s output.
    public var name: String {
        switch self {
        case .sha256: "sha256"
        case .sha512: "sha512"
        }
    }

    /// Length of a digest in bytes (twice that in hex digits).
    public var byteCount: Int {
        switch self {
        case .sha256: 32
        case .sha512: 64
        }
    }

    /// Key of the expected digest (hex) in a journal record's identity: `sha256=...`.
    /// A `StaticString` so the no-op path compares it with a line's bytes without making a String.
    @usableFromInline package var journalKey: StaticString {
        switch self {
        case .sha256: "sha256"
        case .sha512: "sha512"
        }
    }

    /// Key of the saved hash state (``Hasher/exportState()``, hex) in a partial record: `h256=...`.
    @usableFromInline package var stateKey: StaticString {
        switch self {
        case .sha256: "h256"
        case .sha512: "h512"
        }
    }

    /// First byte of a saved hash state, so a state is never restored into another algorithm's context.
    var stateTag: UInt8 {
        switch self {
        case .sha256: 1
        case .sha512: 2
        }
    }

    /// The algorithm whose ``journalKey`` (or, with `state`, ``stateKey``) is exactly `key`.
    /// `@inlinable`: the journal (another target) asks it for every digest of every record it
    /// reads, and unspecialized it cost a no-op run of 10,000 entries 37 M instructions.
    @inlinable package static func journal<C: Collection>(key: C, state: Bool = false) -> DigestAlgorithm? where C.Element == UInt8 {
        var raw = 0
        while let algorithm = DigestAlgorithm(rawValue: raw) {
            let name = state ? algorithm.stateKey : algorithm.journalKey
            let bytes = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
            if key.count == bytes.count && key.elementsEqual(bytes) { return algorithm }
            raw += 1
        }
        return nil
    }

    // MARK: - libcrypto's low-level interface (used by ``Hasher``)

    /// Size of the algorithm's context struct (`SHA256_CTX`, `SHA512_CTX`), which ``Hasher`` owns
    /// and saves byte for byte.
    var contextSize: Int {
        switch self {
        case .sha256: MemoryLayout<SHA256_CTX>.size
        case .sha512: MemoryLayout<SHA512_CTX>.size
        }
    }

    /// `SHA256_Init` / `SHA512_Init` on a context of ``contextSize`` bytes.
    func initialize(_ context: UnsafeMutableRawPointer) {
        switch self {
        case .sha256: SHA256_Init(context.assumingMemoryBound(to: SHA256_CTX.self))
        case .sha512: SHA512_Init(context.assumingMemoryBound(to: SHA512_CTX.self))
        }
    }

    /// `SHA256_Update` / `SHA512_Update`.
    func update(_ context: UnsafeMutableRawPointer, _ bytes: UnsafeRawPointer, _ count: Int) {
        switch self {
        case .sha256: SHA256_Update(context.assumingMemoryBound(to: SHA256_CTX.self), bytes, count)
        case .sha512: SHA512_Update(context.assumingMemoryBound(to: SHA512_CTX.self), bytes, count)
        }
    }

    /// `SHA256_Final` / `SHA512_Final` into `out`, which holds ``byteCount`` bytes.
    func finish(_ context: UnsafeMutableRawPointer, into out: UnsafeMutablePointer<UInt8>) {
        switch self {
        case .sha256: SHA256_Final(out, context.assumingMemoryBound(to: SHA256_CTX.self))
        case .sha512: SHA512_Final(out, context.assumingMemoryBound(to: SHA512_CTX.self))
        }
    }
}

/// One optional value per ``DigestAlgorithm``, in the algorithms' fixed order: the digests a
/// manifest entry lists (``DigestSet``), their hex as a journal record holds them, or a partial
/// download's saved hash states.
///
/// A struct with one stored slot per algorithm rather than a dictionary: reading and iterating
/// allocate nothing, which the no-op path (`VerifiedIndex.matches(path:size:digests:status:)`, once per manifest
/// entry) relies on, and the iteration order is the journal's field order.
///
/// Its members are `@inlinable`: the journal, the plan and the run (other targets) ask for an
/// entry's digests per entry, and a generic type used across targets is otherwise not
/// specialized there, which costs a run-time type lookup per call (docs/performance.md,
/// "Targets and inlining").
public struct PerAlgorithm<Value> {
    @usableFromInline var sha256: Value?
    @usableFromInline var sha512: Value?

    @inlinable public init() {}

    /// A set holding one value (or none, when `value` is nil).
    @inlinable public init(_ algorithm: DigestAlgorithm, _ value: Value?) {
        self[algorithm] = value
    }

    @inlinable public subscript(algorithm: DigestAlgorithm) -> Value? {
        get {
            switch algorithm {
            case .sha256: sha256
            case .sha512: sha512
            }
        }
        set {
            switch algorithm {
            case .sha256: sha256 = newValue
            case .sha512: sha512 = newValue
            }
        }
    }

    @inlinable public var isEmpty: Bool { first { _ in true } == nil }

    /// The algorithms that have a value, in order.
    @inlinable public var algorithms: [DigestAlgorithm] { map(\.algorithm) }

    /// The values transformed; a nil result leaves that algorithm without a value.
    @inlinable public func compactMapValues<T>(_ transform: (Value) throws -> T?) rethrows -> PerAlgorithm<T> {
        var out = PerAlgorithm<T>()
        for (algorithm, value) in self { out[algorithm] = try transform(value) }
        return out
    }

    @inlinable public func mapValues<T>(_ transform: (Value) throws -> T) rethrows -> PerAlgorithm<T> {
        try compactMapValues(transform)
    }
}

/// The expected (or computed) digests of one file.
public typealias DigestSet = PerAlgorithm<Digest>

extension PerAlgorithm: Sequence {
    /// Each algorithm that has a value, with it, in ``DigestAlgorithm``'s order.
    public struct Iterator: IteratorProtocol {
        @usableFromInline let values: PerAlgorithm
        @usableFromInline var raw = 0

        @inlinable init(values: PerAlgorithm) { self.values = values }

        @inlinable public mutating func next() -> (algorithm: DigestAlgorithm, value: Value)? {
            while let algorithm = DigestAlgorithm(rawValue: raw) {
                raw += 1
                if let value = values[algorithm] { return (algorithm, value) }
            }
            return nil
        }
    }

    @inlinable public func makeIterator() -> Iterator { Iterator(values: self) }
}

extension PerAlgorithm: ExpressibleByDictionaryLiteral {
    @inlinable public init(dictionaryLiteral elements: (DigestAlgorithm, Value)...) {
        for (algorithm, value) in elements { self[algorithm] = value }
    }
}

extension PerAlgorithm: Equatable where Value: Equatable {}
extension PerAlgorithm: Hashable where Value: Hashable {}
extension PerAlgorithm: Sendable where Value: Sendable {}

extension PerAlgorithm: CustomStringConvertible {
    public var description: String {
        "[" + map { "\($0.algorithm.name): \($0.value)" }.joined(separator: ", ") + "]"
    }
}
