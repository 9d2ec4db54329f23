import Testing
import MirrorCore

/// Range validation: every response is judged before a byte of its body is written.
@Suite struct ResponseCheckTests {
    func head(_ status: Int, _ headers: [String: String] = [:]) -> ResponseHead {
        ResponseHead(status: status, headers: headers)
    }

    @Test func aFullResponseIsAcceptedFromZero() {
        #expect(ResponseCheck.verdict(for: head(200, ["content-length": "1000"]), requestedOffset: 0, expectedSize: 1000)
                == .accept(startOffset: 0))
        #expect(ResponseCheck.verdict(for: head(200), requestedOffset: 0, expectedSize: 1000) == .accept(startOffset: 0))
    }

    /// The whole file to a resume: refused here, so that the runner starts over from zero on its
    /// own thread (the transfer thread does not journal the forget that must come first).
    @Test func a200ToARangeRequestMeansStartingOver() {
        #expect(ResponseCheck.verdict(for: head(200, ["content-length": "1000"]), requestedOffset: 400, expectedSize: 1000)
                == .reject(.rangeIgnored))
    }

    @Test func aLengthOtherThanTheManifestsIsRefused() {
        #expect(ResponseCheck.verdict(for: head(200, ["content-length": "999"]), requestedOffset: 0, expectedSize: 1000)
                == .reject(.lengthMismatch(server: 999, expected: 1000)))
        // In a 206, another total says the source's ranges cannot be trusted; the full response
        // of the next attempt then settles whether the file itself differs.
        let lying = ResponseCheck.verdict(for: head(206, ["content-range": "bytes 400-1199/1200"]), requestedOffset: 400, expectedSize: 1000)
        #expect(lying == .reject(.badContentRange("bytes 400-1199/1200", expected: "bytes 400-999/1000")))
    }

    @Test func anExactPartialResponseIsAccepted() {
        let h = head(206, ["content-range": "bytes 400-999/1000", "content-length": "600"])
        #expect(ResponseCheck.verdict(for: h, requestedOffset: 400, expectedSize: 1000) == .accept(startOffset: 400))
    }

    @Test(arguments: [
        "bytes 0-999/1000",      // wrong start: would duplicate the prefix
        "bytes 401-999/1000",    // wrong start: would leave a hole
        "bytes 400-998/1000",    // wrong end
        "bytes 400-999/*",       // no complete length
        "bytes */1000",          // unsatisfied form on a 206
        "bytes 400-300/1000",    // end before start
        "bytes 400-99999999999999999999/1000",  // overflow
        "items 400-999/1000",    // wrong unit
        "garbage",
        "bytes 400-999/1200",    // another total
    ])
    func aLyingContentRangeIsRefused(contentRange: String) {
        let verdict = ResponseCheck.verdict(for: head(206, ["content-range": contentRange]), requestedOffset: 400, expectedSize: 1000)
        guard case .reject(let failure) = verdict else {
            Issue.record("accepted \(contentRange)")
            return
        }
        #expect(failure.isTransient)
        #expect(failure.distrustsRanges, "the next attempt must not trust this source's ranges")
    }

    @Test func a206WithoutContentRangeOrToAFullRequestIsRefused() {
        guard case .reject = ResponseCheck.verdict(for: head(206), requestedOffset: 400, expectedSize: 1000) else {
            Issue.record("accepted a 206 without Content-Range"); return
        }
        guard case .reject = ResponseCheck.verdict(for: head(206, ["content-range": "bytes 0-999/1000"]), requestedOffset: 0, expectedSize: 1000) else {
            Issue.record("accepted a 206 to a request without Range"); return
        }
    }

    @Test func aContentLengthDisagreeingWithTheRangeIsRefused() {
        let h = head(206, ["content-range": "bytes 400-999/1000", "content-length": "700"])
        guard case .reject = ResponseCheck.verdict(for: h, requestedOffset: 400, expectedSize: 1000) else {
            Issue.record("accepted"); return
        }
    }

    @Test func encodedBodiesAreRefusedIdentityIsFine() {
        #expect(ResponseCheck.verdict(for: head(200, ["content-encoding": "gzip"]), requestedOffset: 0, expectedSize: 10)
                == .reject(.contentEncoding("gzip")))
        #expect(ResponseCheck.verdict(for: head(206, ["content-encoding": "br", "content-range": "bytes 5-9/10"]), requestedOffset: 5, expectedSize: 10)
                == .reject(.contentEncoding("br")))
        #expect(ResponseCheck.verdict(for: head(200, ["content-encoding": "identity"]), requestedOffset: 0, expectedSize: 10)
                == .accept(startOffset: 0))
    }

    @Test func rangeNotSatisfiableCarriesTheServersLength() {
        #expect(ResponseCheck.verdict(for: head(416, ["content-range": "bytes */1000"]), requestedOffset: 1000, expectedSize: 1000)
                == .rangeNotSatisfiable(completeLength: 1000))
        #expect(ResponseCheck.verdict(for: head(416), requestedOffset: 1000, expectedSize: 1000)
                == .rangeNotSatisfiable(completeLength: nil))
    }

    @Test func errorStatusesAreRefusedAndClassified() {
        #expect(ResponseCheck.verdict(for: head(404), requestedOffset: 0, expectedSize: 10) == .reject(.httpStatus(404, retryAfter: nil)))
        #expect(TransferFailure.httpStatus(404, retryAfter: nil).isTransient == false)
        #expect(TransferFailure.httpStatus(403, retryAfter: nil).isTransient == false)
        #expect(TransferFailure.httpStatus(503, retryAfter: nil).isTransient)
        #expect(TransferFailure.httpStatus(500, retryAfter: nil).isTransient)
        #expect(TransferFailure.httpStatus(429, retryAfter: nil).isTransient)
        #expect(TransferFailure.tooMuchData(limit: 10, ranged: true).isTransient, "a range bug: retry from zero")
        #expect(TransferFailure.tooMuchData(limit: 10, ranged: false).isTransient == false, "an endless or oversized full body")
        #expect(ResponseCheck.verdict(for: head(503, ["retry-after": "7"]), requestedOffset: 0, expectedSize: 10)
                == .reject(.httpStatus(503, retryAfter: 7)))
    }

    @Test func weakETagsAreNotResumeValidators() {
        #expect(head(200, ["etag": "W/\"abc\"", "last-modified": "Sun, 06 Nov 1994 08:49:37 GMT"]).resumeValidator
                == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(head(200, ["etag": "\"abc\""]).resumeValidator == "\"abc\"")
        #expect(head(200, ["etag": "W/\"abc\""]).resumeValidator == nil)
    }
}

@Suite struct RetryAfterTests {
    @Test func seconds() {
        #expect(RetryAfter.seconds(from: "120") == 120)
        #expect(RetryAfter.seconds(from: " 0 ") == 0)
        #expect(RetryAfter.seconds(from: "-5") == nil)
        #expect(RetryAfter.seconds(from: "soon") == nil)
    }

    @Test func httpDates() {
        // RFC 9110 §5.6.7's example: 784111777 seconds after the epoch.
        #expect(RetryAfter.parseIMFFixdate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:47 GMT", now: 784_111_777) == 10)
        #expect(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_999) == 0, "a date in the past means now")
        #expect(RetryAfter.parseIMFFixdate("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
        #expect(RetryAfter.parseIMFFixdate("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
    }
}

/// A segment asks for `bytes=FIRST-LAST` and accepts exactly that range back.
@Suite struct SegmentResponseCheckTests {
    let size: Int64 = 1000

    func head(_ status: Int, _ headers: [String: String] = [:]) -> ResponseHead {
        ResponseHead(status: status, headers: headers)
    }

    @Test func theExactRangeIsAcceptedEvenFromZero() {
        let first = head(206, ["content-range": "bytes 0-249/1000", "content-length": "250"])
        #expect(ResponseCheck.verdict(for: first, requestedOffset: 0, requestedEnd: 249, expectedSize: size) == .accept(startOffset: 0))
        let middle = head(206, ["content-range": "bytes 500-749/1000"])
        #expect(ResponseCheck.verdict(for: middle, requestedOffset: 500, requestedEnd: 749, expectedSize: size) == .accept(startOffset: 500))
    }

    @Test func anotherRangeOrLengthIsRefused() {
        for (range, length) in [("bytes 500-999/1000", "500"), ("bytes 500-749/2000", "250"), ("bytes 501-749/1000", "249"),
                                ("bytes 500-749/1000", "500")] {
            let verdict = ResponseCheck.verdict(for: head(206, ["content-range": range, "content-length": length]),
                                                requestedOffset: 500, requestedEnd: 749, expectedSize: size)
            guard case .reject(.badContentRange) = verdict else {
                Issue.record("\(range) with length \(length) was not refused: \(verdict)")
                continue
            }
        }
    }

    @Test func theWholeFileInsteadOfASegmentMeansNoSegments() {
        let verdict = ResponseCheck.verdict(for: head(200, ["content-length": "1000"]), requestedOffset: 0, requestedEnd: 249,
                                            expectedSize: size)
        #expect(verdict == .reject(.rangeIgnored))
        #expect(TransferFailure.rangeIgnored.isTransient)
    }
}
