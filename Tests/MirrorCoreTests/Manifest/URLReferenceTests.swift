@testable import MirrorModel
import Testing
@testable import MirrorCore
import MirrorTestSupport

/// RFC 3986 §5.4.1 "Normal Examples" (all of them) and some of §5.4.2 "Abnormal Examples".
private let rfcBase = "http://a/b/c/d;p?q"
private let rfcExamples: [(String, String)] = [
    ("g:h", "g:h"), ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"), ("//g", "http://g"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q#s"), ("g#s", "http://a/b/c/g#s"), ("g?y#s", "http://a/b/c/g?y#s"),
    (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"), ("g;x?y#s", "http://a/b/c/g;x?y#s"),
    ("", "http://a/b/c/d;p?q"), (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"),
    ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"),
    ("../../g", "http://a/g"),
    // §5.4.2
    ("../../../g", "http://a/g"), ("../../../../g", "http://a/g"), ("/./g", "http://a/g"),
    ("/../g", "http://a/g"), ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."),
    ("./../g", "http://a/b/g"), ("./g/.", "http://a/b/c/g/"), ("g/./h", "http://a/b/c/g/h"),
    ("g/../h", "http://a/b/c/h"), ("g;x=1/./y", "http://a/b/c/g;x=1/y"), ("g;x=1/../y", "http://a/b/c/y"),
    ("g?y/./x", "http://a/b/c/g?y/./x"), ("g#s/../x", "http://a/b/c/g#s/../x"), ("http:g", "http:g"),
]

@Test(arguments: rfcExamples.indices)
func resolvesRFC3986Examples(_ i: Int) {
    let (reference, expected) = rfcExamples[i]
    #expect(URLReference.resolve(reference, against: rfcBase) == expected, "reference \"\(reference)\"")
}

@Test func resolvesAgainstManifestStyleBases() {
    #expect(URLReference.resolve("videos/intro.mp4", against: "https://media.example.org/lab/")
            == "https://media.example.org/lab/videos/intro.mp4")
    #expect(URLReference.resolve("../x", against: "https://h/lab/") == "https://h/x")
    #expect(URLReference.resolve("/root", against: "file:///srv/lab/") == "file:///root")
    #expect(URLReference.resolve("run%207/a", against: "https://h:8443/lab/") == "https://h:8443/lab/run%207/a")
}

@Test func resolveFailsWithoutAnAbsoluteBase() {
    #expect(URLReference.resolve("a", against: "lab/") == nil)
    #expect(URLReference.resolve("1a:b", against: "https://h/") == nil)
}

@Test func encodesPathComponents() {
    #expect(URLReference.encodePathComponent("run 7") == "run%207")
    #expect(URLReference.encodePathComponent("a/b") == "a%2Fb")
    #expect(URLReference.encodePathComponent("50%?#") == "50%25%3F%23")
    #expect(URLReference.encodePathComponent("été") == "%C3%A9t%C3%A9")
    #expect(URLReference.encodePathComponent("a+b=c;d&e:f@g") == "a%2Bb%3Dc%3Bd%26e%3Af%40g")
    #expect(URLReference.encodePathComponent("Az09-._~!$'()*,") == "Az09-._~!$'()*,")
    #expect(URLReference.encodePathComponent("\u{1}\u{7f}\"<>[]\\^`{|}")
            == "%01%7F%22%3C%3E%5B%5D%5C%5E%60%7B%7C%7D")
}

/// The joining shortcut agrees with §5.2 step by step on every reference it takes, over random
/// references and bases built from the characters that matter (dots, slashes, ":", "?", "#").
@Test func joiningAgreesWithTheStepByStepResolution() {
    let seed = UInt64.random(in: 1 ... .max)
    var random = SeededRandom(seed: seed)
    let pieces = ["a", "b", "/", ".", "..", ":", "?", "#", "%2e", ";x", "@", "8", "-"]
    let bases = ["http://h/", "http://h:8080/lab/", "https://u:p@h/a/b/", "file:///srv/", "http://h/./x/",
                 "http://h/a/../", "http://h/a?q/", "http://h/a#f/", "x+y.z:/p/", "http://h/a", "1x://h/", "http://h//",
                 "x://", "file://", "x:./", "x:../", "x:./d/", "x:d/", "x:/./", "http://[::1]:8/a/", "http://%2e/"]
    var joined = 0
    for _ in 0 ..< 20_000 {
        let reference = (0 ..< random.inRange(0 ... 6)).map { _ in random.pick(pieces) }.joined()
        let base = random.pick(bases)
        guard let fast = URLReference.join(reference, to: base) else { continue }
        joined += 1
        let slow = URLReference.resolveBySplitting(reference, against: base)
        #expect(slow.map { fast.utf8.elementsEqual($0.utf8) } == true,
                "seed \(seed): \"\(reference)\" against \"\(base)\": \(fast) against \(slow ?? "nil")")
    }
    #expect(joined > 1000, "seed \(seed): the shortcut took only \(joined) references")
    #expect(URLReference.join("small/f00001.bin", to: "http://127.0.0.1:28431/") == "http://127.0.0.1:28431/small/f00001.bin")
    #expect(URLReference.join("a/./b", to: "http://h/") == nil)
    #expect(URLReference.join("a", to: "http://h/?q/") == nil)
}
