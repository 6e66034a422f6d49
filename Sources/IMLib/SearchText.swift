/// How message text becomes FTS5 tokens, and a keyword an FTS5 query, so that a keyword matches
/// inside Chinese, Japanese and Korean text, which has no spaces between words.
///
/// FTS5's `unicode61` tokenizer splits on spaces and punctuation, so "今天天气很好" would be one
/// token and "天气" would not find it. Each Han, Kana or Hangul character is therefore indexed as a
/// token of its own, and a keyword becomes a phrase of those tokens: "天气" is the phrase "天 气",
/// found wherever the two characters stand side by side. Latin words stay whole words, and the
/// keyword's last word matches as a prefix ("wor" finds "world").
enum SearchText {
    /// The text to index for a message's searchable words.
    static func indexed(_ words: [String]) -> String {
        words.map(spaced).joined(separator: "\n")
    }

    /// The FTS5 query for a keyword, or nil when the keyword has no letter or digit to look for.
    static func query(_ keyword: String) -> String? {
        let tokenScalars = keyword.unicodeScalars.filter { $0.properties.isAlphabetic || $0.properties.numericType != nil }
        guard let last = tokenScalars.last else { return nil }
        let phrase = "\"" + spaced(keyword).replacingOccurrences(of: "\"", with: "\"\"") + "\""
        return isCJK(last) ? phrase : phrase + " *"
    }

    /// The text with a space on each side of every CJK character.
    static func spaced(_ text: String) -> String {
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isCJK(scalar) {
                result.append(" ")
                result.append(scalar)
                result.append(" ")
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// Han ideographs, Kana and Hangul: scripts written without spaces between words.
    static func isCJK(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x3040...0x30FF,   // Hiragana, Katakana
             0x31F0...0x31FF,   // Katakana phonetic extensions
             0x3400...0x4DBF,   // CJK extension A
             0x4E00...0x9FFF,   // CJK unified ideographs
             0xF900...0xFAFF,   // CJK compatibility ideographs
             0xFF66...0xFF9F,   // halfwidth Katakana
             0x1100...0x11FF,   // Hangul Jamo
             0x3130...0x318F,   // Hangul compatibility Jamo
             0xAC00...0xD7AF,   // Hangul syllables
             0x20000...0x3134F: // CJK extensions B-G
            return true
        default:
            return false
        }
    }
}
