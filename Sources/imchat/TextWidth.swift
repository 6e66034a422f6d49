/// Terminal cell widths: East Asian wide and fullwidth characters and most emoji take two cells,
/// combining marks none (the ranges of Unicode's EastAsianWidth W/F and general category Mn/Me).
enum TextWidth {
    static func of(_ scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value == 0 { return 0 }
        if value < 0x20 || (0x7F..<0xA0).contains(value) { return 0 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if value == 0x200B { return 0 }
        if isWide(value) { return 2 }
        return 1
    }

    static func isWide(_ value: UInt32) -> Bool {
        switch value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
             0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
             0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default:
            return false
        }
    }

    static func of(_ character: Character) -> Int {
        // A grapheme is as wide as its widest scalar (a base and its marks share the cells).
        character.unicodeScalars.map(of).max() ?? 0
    }

    static func of(_ text: String) -> Int { text.reduce(0) { $0 + of($1) } }

    /// The text cut to `width` cells (an ellipsis marks the cut), then padded with spaces to it.
    static func fit(_ text: String, _ width: Int, pad: Bool = true) -> String {
        guard width > 0 else { return "" }
        var result = ""
        var used = 0
        let total = of(text)
        let limit = total > width ? width - 1 : width
        for character in text {
            let cells = of(character)
            if used + cells > limit { break }
            result.append(character)
            used += cells
        }
        if total > width {
            result.append("…")
            used += 1
        }
        if pad && used < width { result += String(repeating: " ", count: width - used) }
        return result
    }

    /// The text broken into lines of at most `width` cells.
    static func wrap(_ text: String, _ width: Int) -> [String] {
        guard width > 0 else { return [] }
        var lines: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            var used = 0
            for character in paragraph {
                let cells = of(character)
                if used + cells > width {
                    lines.append(line)
                    line = ""
                    used = 0
                }
                line.append(character)
                used += cells
            }
            lines.append(line)
        }
        return lines
    }
}
