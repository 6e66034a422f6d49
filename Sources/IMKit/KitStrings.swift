import IMCore

/// The languages of the kit's texts (RongCloud ships `en` and `zh-Hans` language packs).
public enum KitLanguage: String, Sendable, CaseIterable {
    case english = "en"
    case simplifiedChinese = "zh-Hans"
}

/// Every text the kit itself shows: recall notices, digests, banners, indicators.
public struct KitStrings: Sendable {
    public let language: KitLanguage

    public init(_ language: KitLanguage) { self.language = language }

    private func pick(_ en: String, _ zh: String) -> String { language == .english ? en : zh }

    public var youRecalled: String { pick("You recalled a message", "你撤回了一条消息") }
    public func recalled(by name: String) -> String { pick("\(name) recalled a message", "\(name)撤回了一条消息") }
    /// Shown in place of a quoted message's snapshot once the original was recalled.
    public var quotedRecalled: String { pick("The quoted message was recalled", "引用内容已撤回") }
    public var draft: String { pick("[Draft]", "[草稿]") }
    public var mentionedYou: String { pick("[@ you]", "[有人@我]") }
    public var typing: String { pick("typing…", "对方正在输入…") }
    public var image: String { pick("[Image]", "[图片]") }
    public var gif: String { pick("[Image]", "[图片]") }
    public var voice: String { pick("[Voice]", "[语音]") }
    public func file(_ name: String) -> String { pick("[File] \(name)", "[文件] \(name)") }
    public var sight: String { pick("[Short video]", "[小视频]") }
    public var location: String { pick("[Location]", "[位置]") }
    public var chatHistory: String { pick("[Chat history]", "[聊天记录]") }
    public func richContent(_ title: String) -> String { pick("[Link] \(title)", "[图文] \(title)") }
    public var unsupported: String { pick("[Unsupported message]", "[当前版本不支持此消息]") }
    public var system: String { pick("System", "系统消息") }
    public var connecting: String { pick("Connecting…", "连接中…") }
    public func reconnecting(inSeconds seconds: Int) -> String { pick("Reconnecting in \(seconds)s", "\(seconds)秒后重连") }
    public var suspended: String { pick("Connection lost: reconnecting", "连接已断开, 正在重连") }
    public var networkUnavailable: String { pick("The network is unavailable", "当前网络不可用") }
    public var kickedByOtherDevice: String { pick("Logged in on another device", "您的帐号在别的设备上登录") }
    public var tokenIncorrect: String { pick("The login has expired: sign in again", "登录已失效, 请重新登录") }
    public var banned: String { pick("This account is banned", "您的帐号已被封禁") }
    public var appBanned: String { pick("This app is banned or deleted", "应用已被封禁或删除") }
    public var timedOut: String { pick("Could not connect in time: try again", "连接超时, 请重试") }
    public var signedOut: String { pick("Signed out", "已退出登录") }
    public var deactivated: String { pick("This account was deactivated", "帐号已注销") }
    public func unreadAbove(_ count: Int) -> String { pick("\(count) unread ↑", "\(count)条新消息 ↑") }
    public var unreadAboveNoCount: String { pick("unread ↑", "新消息 ↑") }
    public func newBelow(_ count: Int) -> String { pick("↓ \(count) new", "↓ \(count)条新消息") }
    public var read: String { pick("✓ read", "已读") }
    public var unread: String { pick("unread", "未读") }
    public func readCount(_ count: Int) -> String { pick("\(count) read", "\(count)人已读") }
    public var sending: String { pick("sending", "发送中") }
    public var failed: String { pick("failed", "发送失败") }
    public var canceled: String { pick("canceled", "已取消") }
    public var reedit: String { pick("re-edit", "重新编辑") }
    public var everyone: String { pick("everyone", "所有人") }
    public var locationSharingStarted: String { pick("[Location sharing started]", "[发起了位置共享]") }
    public var locationSharingEnded: String { pick("[Location sharing ended]", "[位置共享已结束]") }
    public var youAreSharingLocation: String { pick("You are sharing your location", "你正在共享位置") }
    public func isSharingLocation(_ name: String) -> String { pick("\(name) is sharing location", "\(name)正在共享位置") }
    public func peopleSharingLocation(_ count: Int) -> String { pick("\(count) people are sharing location", "\(count)人正在共享地理位置") }
    public var youJoinedLocationSharing: String { pick("You joined location sharing", "你加入了位置共享") }
    public func joinedLocationSharing(_ name: String) -> String { pick("\(name) joined location sharing", "\(name)加入了位置共享") }
    public var youQuitLocationSharing: String { pick("You quit location sharing", "你退出了位置共享") }
    public func quitLocationSharing(_ name: String) -> String { pick("\(name) quit location sharing", "\(name)退出了位置共享") }
}
