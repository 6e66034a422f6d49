import Foundation

/// A compact JWT split for checking: the decoded header and claims, the signed input and the
/// signature bytes. The test servers check tokens with this rather than with IMPush's own code.
struct JWTParts {
    var header: [String: Any]
    var claims: [String: Any]
    var signingInput: Data
    var signature: Data

    init?(_ token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerData = Self.base64URLDecode(parts[0]), let claimsData = Self.base64URLDecode(parts[1]),
              let signature = Self.base64URLDecode(parts[2]),
              let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any] else { return nil }
        self.header = header
        self.claims = claims
        self.signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        self.signature = signature
    }

    func int(_ claim: String) -> Int? { (claims[claim] as? NSNumber)?.intValue }

    static func base64URLDecode(_ text: some StringProtocol) -> Data? {
        guard !text.contains("="), !text.contains("+"), !text.contains("/") else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64.append("=") }
        return Data(base64Encoded: base64)
    }
}
