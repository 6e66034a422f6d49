import IMCore

extension ServerConfig {
    /// Media files: where they are kept, how large they may be, how long they are kept.
    public struct MediaSettings: SettingsArea {
        public static let title = "Media files"
        public static let summary = "Files clients upload for media messages (docs/MEDIA.md): where they are kept, their limits and retention."

        @Setting(key: "mediaDir",
                 doc: "Directory of the uploaded files; empty: `media` in dataDir. Nodes of a cluster share one directory (a network file system mounted on each).")
        public var directory = ""

        @Setting(key: "mediaRetentionDays", allowed: .range(1...36_500), perApp: true,
                 doc: "Days an uploaded image, GIF, voice message or file is kept (RongCloud: 180); afterwards its download answers 34020.")
        public var retentionDays = MediaLimits.defaultRetentionDays

        @Setting(key: "sightRetentionDays", allowed: .range(1...36_500), perApp: true,
                 doc: "Days an uploaded short video is kept (RongCloud: 7).")
        public var sightRetentionDays = MediaLimits.defaultSightRetentionDays

        @Setting(key: "mediaMaxFileMB", allowed: .range(1...4096), perApp: true,
                 doc: "Largest file message upload, in MB (RongCloud: 100).")
        public var maxFileMB = MediaLimits.defaultMaxFileMB

        @Setting(key: "mediaMaxGifMB", allowed: .range(1...100), perApp: true,
                 doc: "Largest GIF, in MB (RongCloud: 2; larger: 34003).")
        public var maxGifMB = MediaLimits.defaultMaxGifMB

        @Setting(key: "mediaMaxImageMB", allowed: .range(1...100), perApp: true,
                 doc: "Largest image (an original sent with `full`), in MB.")
        public var maxImageMB = MediaLimits.defaultMaxImageMB

        @Setting(key: "mediaMaxSightSeconds", allowed: .range(1...3600), perApp: true,
                 doc: "Longest short video, in seconds (RongCloud: 2 minutes; longer: 34002).")
        public var maxSightSeconds = MediaLimits.defaultMaxSightSeconds

        @Setting(key: "mediaMaxVoiceSeconds", allowed: .range(1...3600), perApp: true,
                 doc: "Longest HQ voice message, in seconds (RongCloud: 60; longer: 34019).")
        public var maxVoiceSeconds = MediaLimits.defaultMaxVoiceSeconds

        @Setting(key: "mediaToolsDir",
                 doc: "Directory holding libvips's `vips` and `vipsheader` and ffmpeg's `ffprobe` and `ffmpeg`, which check uploads and make thumbnails (scripts/media-tools.sh installs them); empty: found on PATH. Without them uploads are kept unchecked and without thumbnails.")
        public var toolsDirectory = ""

        public init() {}

        /// The most bytes an upload of this type may carry.
        public func maxBytes(_ type: MediaType) -> Int64 {
            let megabytes: Int
            switch type {
            case .image: megabytes = maxImageMB
            case .gif: megabytes = maxGifMB
            case .voice: megabytes = MediaLimits.maxVoiceMB
            case .file: megabytes = maxFileMB
            case .sight: megabytes = max(maxFileMB, MediaLimits.maxSightMB)
            }
            return Int64(megabytes) * 1_048_576
        }

        /// Days a file of this type is kept.
        public func retention(_ type: MediaType) -> Int {
            type == .sight ? sightRetentionDays : retentionDays
        }
    }
}
