import Testing
@testable import MirrorModel

/// ``GlobPattern`` (rsync's pattern rules on bytes) and ``PathFilter`` (the last matching rule
/// decides; the first rule sets what an unmatched path gets), without a server.
@Suite struct PathFilterTests {
    static func matches(_ pattern: String, _ path: String) throws -> Bool {
        try GlobPattern(pattern).matches(Array(path.utf8))
    }

    @Test func aNamePatternMatchesANameAtAnyDepth() throws {
        #expect(try Self.matches("*.iso", "win.iso"))
        #expect(try Self.matches("*.iso", "images/2026/win.iso"))
        #expect(try !Self.matches("*.iso", "images/win.iso.txt"))
        #expect(try Self.matches(".DS_Store", "a/b/.DS_Store"))
        // A folder's name matches every file under it.
        #expect(try Self.matches("old", "courses/old/a.mp4"))
        #expect(try !Self.matches("old", "courses/older/a.mp4"))
    }

    @Test func aWholePathPatternMatchesFromAnyNameUnlessAnchored() throws {
        #expect(try Self.matches("bio101/*.mp4", "courses/bio101/intro.mp4"))
        #expect(try !Self.matches("bio101/*.mp4", "courses/xbio101/intro.mp4"))
        #expect(try !Self.matches("/bio101/*.mp4", "courses/bio101/intro.mp4"))
        #expect(try Self.matches("/courses/bio101", "courses/bio101/week1/intro.mp4"))
        #expect(try !Self.matches("/courses/bio101", "courses/bio1010/intro.mp4"))
    }

    @Test func oneStarStopsAtASlashTwoDoNot() throws {
        #expect(try !Self.matches("/courses/*.mp4", "courses/bio101/intro.mp4"))
        #expect(try Self.matches("/courses/**.mp4", "courses/bio101/intro.mp4"))
        #expect(try Self.matches("/courses/**/intro.mp4", "courses/intro.mp4"))
        #expect(try Self.matches("/courses/**/intro.mp4", "courses/a/b/intro.mp4"))
        #expect(try Self.matches("courses/bio101/**", "courses/bio101/a/b.mp4"))
        #expect(try !Self.matches("courses/bio101/**", "courses/bio1010/b.mp4"))
    }

    @Test func questionMarksAndClassesTakeOneCharacterNotOneByte() throws {
        #expect(try Self.matches("caf?.txt", "café.txt"))
        #expect(try !Self.matches("caf?.txt", "caf.txt"))
        #expect(try Self.matches("[!a-c]*.txt", "dé.txt"))
        #expect(try !Self.matches("[!a-c]*.txt", "b.txt"))
        #expect(try Self.matches("[]x].txt", "].txt"))
        #expect(try Self.matches("[é]", "é"))
        #expect(try !Self.matches("a?b", "a/b"))
        #expect(try Self.matches("\\*.txt", "*.txt"))
        #expect(try !Self.matches("\\*.txt", "a.txt"))
    }

    @Test func aTrailingSlashMatchesFoldersOnlyAndTripleStarIsTheFolder() throws {
        #expect(try Self.matches("tmp/", "a/tmp/x"))
        #expect(try !Self.matches("tmp/", "a/tmp"))
        #expect(try Self.matches("/courses/***", "courses/a.mp4"))
        #expect(try !Self.matches("/courses/***", "other/a.mp4"))
    }

    @Test func namesThatAreNotUTF8AreMatchedByTheirBytes() {
        let path: [UInt8] = Array("dir/".utf8) + [0xFF, 0x41] + Array(".bin".utf8)
        #expect((try? GlobPattern("dir/??.bin").matches(path)) == true)
        #expect((try? GlobPattern("*.bin").matches(path)) == true)
    }

    @Test func manyStarsDoNotBacktrackForever() throws {
        let path = String(repeating: "a", count: 200)
        #expect(try !Self.matches("*a*a*a*a*a*a*a*a*a*a*a*a*b", path))
        #expect(try !Self.matches("**a**a**a**a**a**a**a**a**b", path))
    }

    @Test func malformedPatternsAreRefused() {
        #expect(throws: GlobPattern.Problem.unclosedClass) { try GlobPattern("[abc") }
        #expect(throws: GlobPattern.Problem.trailingBackslash) { try GlobPattern("abc\\") }
        #expect(throws: GlobPattern.Problem.empty) { try GlobPattern("/") }
    }

    static func filter(_ rules: [(PathFilter.Action, String)]) throws -> PathFilter {
        PathFilter(rules: try rules.map { PathFilter.Rule($0.0, try GlobPattern($0.1), origin: "--x") })
    }

    @Test func theLastMatchingRuleDecides() throws {
        let f = try Self.filter([(.include, "courses/**"), (.exclude, "courses/old/**")])
        #expect(f.selects(Array("courses/bio/a.mp4".utf8)))
        #expect(!f.selects(Array("courses/old/a.mp4".utf8)))
        let g = try Self.filter([(.exclude, "courses/old/**"), (.include, "courses/**")])
        #expect(g.selects(Array("courses/old/a.mp4".utf8)))
    }

    @Test func anUnmatchedPathTakesTheOppositeOfTheFirstRule() throws {
        let only = try Self.filter([(.include, "courses/bio101")])
        #expect(only.selects(Array("courses/bio101/intro.mp4".utf8)))
        #expect(!only.selects(Array("courses/chem/intro.mp4".utf8)))
        let but = try Self.filter([(.exclude, "*.iso"), (.include, "big.iso")])
        #expect(but.selects(Array("notes.txt".utf8)))
        #expect(!but.selects(Array("small.iso".utf8)))
        #expect(but.selects(Array("images/big.iso".utf8)))
        #expect(PathFilter(rules: []).selects(Array("anything".utf8)))
    }

    @Test func aSelectionCountsWhatItLeftOutAndNamesRulesThatMatchedNothing() throws {
        let manifest = Manifest(sourceName: "m", entries: ["a/1.mp4", "a/2.iso", "b/3.mp4"].map {
            ManifestEntry(path: $0, url: .relative($0), size: 1, digests: DigestSet(.sha256, Digest(bytes: [UInt8](repeating: 1, count: 32))))
        })
        let f = try Self.filter([(.exclude, "*.iso"), (.exclude, "*.mkv")])
        let selection = f.select(manifest)
        #expect(selection.manifest.entries.map(\.path) == ["a/1.mp4", "b/3.mp4"])
        #expect(selection.leftOut == 1)
        #expect(selection.matchedNothing.map(\.pattern.text) == ["*.mkv"])
    }

    @Test func aRulesFileTakesRsyncsShortAndLongForms() throws {
        let text = "# room 3\n+ courses/bio101/**\n\n; old\nexclude *.iso\r\n- a b\n"
        let rules = try PathFilter.rules(fromFile: Array(text.utf8), name: "room3.rules")
        #expect(rules.map(\.action) == [.include, .exclude, .exclude])
        #expect(rules.map(\.pattern.text) == ["courses/bio101/**", "*.iso", "a b"])
        #expect(rules.map(\.origin) == ["room3.rules:2", "room3.rules:5", "room3.rules:6"])
    }

    @Test func aRulesFileLineThatIsNoRuleNamesItsLine() {
        #expect(throws: PathFilter.FileError.self) { try PathFilter.rules(fromFile: Array("+ a\n*.iso\n".utf8), name: "r") }
        do {
            _ = try PathFilter.rules(fromFile: Array("+ a\n+ [x\n".utf8), name: "r")
        } catch {
            #expect(error.description.hasPrefix("r:2: pattern \"[x\""))
        }
    }
}
