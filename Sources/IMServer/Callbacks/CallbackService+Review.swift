import Foundation
import IMCore
import IMStore
import IMWire
import Logging

/// The message callback (消息回调服务): a message the app's filters cover is posted to the app's
/// server before it is stored or delivered, and waits, alone, for the answer.
extension CallbackService {
    public enum Verdict: Sendable, Equatable {
        /// Deliver this (the message as sent, or with what the app's server replaced).
        case deliver(StoredMessage)
        /// Hold back the message asked about (with the uid and time it was given); `extra` is what
        /// the app's server gave for the sender.
        case block(StoredMessage, extra: String)
    }

    /// Whether a message of this app may wait for the message callback, from what this node knows
    /// now (the gateway runs such sends off the connection's reader).
    func mayReview(appId: Int64) -> Bool {
        guard let settings = cachedSettings(appId: appId) else {
            // Not read lately: read it for the next message.
            Task { _ = try? await self.settings(appId: appId) }
            return false
        }
        return settings.messageCallback != nil
    }

    /// Asks the app's server about a message if its filters cover it, after giving the message its
    /// uid and time (the uid asked about is the one delivered: `MessageLog` keeps a uid given). A
    /// failed, refused or late answer (the app's timeout, on the server's clock) delivers the
    /// message as sent, or holds it back when the app set fail-closed.
    func review(_ message: StoredMessage, clientIp: String) async -> Verdict {
        guard let settings = try? await settings(appId: message.appId), let callback = settings.messageCallback,
              callback.covers(message.conversationType, objectName: message.objectName),
              message.senderPlatform != nil || callback.includeServerAPI,
              let app = apps.app(id: message.appId) else { return .deliver(message) }
        var message = message
        message.sentTime = clock.nowMilliseconds()
        message.uid = uids.next(milliseconds: message.sentTime)
        let body = CallbackPayloads.messageCallback(message, appKey: app.appKey, source: CallbackPayloads.source(message.senderPlatform),
                                                     clientIp: clientIp)
        let request = CallbackRequest(
            url: CallbackSignature.signedURL(callback.url, appKey: app.appKey, appSecret: app.appSecret, now: clock.nowMilliseconds()),
            contentType: "application/x-www-form-urlencoded", body: body, headers: [("X-Callback-Id", message.uid)], waitedFor: true)
        let deadline = clock.nowMilliseconds() + callback.timeoutMilliseconds
        let answer: Result<CallbackResponse, ReviewFailure> = await withTaskGroup(of: Result<CallbackResponse, ReviewFailure>.self) { group in
            group.addTask {
                do {
                    // The transport's own deadline is a backstop; the clock's decides.
                    return .success(try await self.transport.post(request, timeout: .milliseconds(callback.timeoutMilliseconds + 1_000)))
                } catch {
                    return .failure(.request("\(error)"))
                }
            }
            group.addTask {
                try? await self.clock.sleep(untilMilliseconds: deadline)
                return .failure(.timedOut)
            }
            let first = await group.next() ?? .failure(.timedOut)
            group.cancelAll()
            return first
        }
        switch answer.flatMap({ Self.verdict(on: $0, for: message) }) {
        case .success(let verdict):
            if case .block = verdict { tally(appId: message.appId) { $0.messagesBlocked += 1 } }
            return verdict
        case .failure(let failure):
            tally(appId: message.appId) { $0.messageCallbackFailures += 1 }
            logger.warning("message callback: no usable answer from the app's server", metadata: [
                "app": "\(message.appId)", "uid": "\(message.uid)", "problem": "\(failure)",
                "then": "\(callback.failClosed ? "held back (fail-closed)" : "delivered (fail-open)")",
            ])
            if callback.failClosed {
                tally(appId: message.appId) { $0.messagesBlocked += 1 }
                return .block(message, extra: "")
            }
            return .deliver(message)
        }
    }

    enum ReviewFailure: Error, CustomStringConvertible {
        case timedOut
        case request(String)
        case answer(String)

        var description: String {
            switch self {
            case .timedOut: return "no answer within the app's timeout"
            case .request(let problem): return "the request failed: \(problem)"
            case .answer(let problem): return "the answer \(problem)"
            }
        }
    }

    /// RongCloud's answer: HTTP 200 with `{"pass": 0|1|2}`; 0 holds the message back (with `extra`
    /// for the sender), 1 and 2 deliver it with `replaceContent`, `replacePushContent`,
    /// `replaceDisablePush`, `replacePushExt` and `replaceExtraContent` applied.
    static func verdict(on response: CallbackResponse, for message: StoredMessage) -> Result<Verdict, ReviewFailure> {
        guard response.status == 200 else { return .failure(.answer("was HTTP \(response.status)")) }
        guard let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] else {
            return .failure(.answer("is not a JSON object"))
        }
        let pass: Int?
        switch object["pass"] {
        case let number as NSNumber: pass = number.intValue
        case let text as String: pass = Int(text)
        default: pass = nil
        }
        guard let pass, (0...2).contains(pass) else { return .failure(.answer("has no pass of 0, 1 or 2")) }
        if pass == 0 {
            return .success(.block(message, extra: String((object["extra"] as? String ?? "").prefix(1024))))
        }
        var message = message
        if let replaced = object["replaceContent"] as? String, !replaced.isEmpty {
            let content = Data(replaced.utf8)
            guard MessageContentRule.violation(of: content) == nil else {
                return .failure(.answer("replaceContent is not a JSON object of at most 128 KB"))
            }
            message.content = content
        }
        if let pushContent = object["replacePushContent"] as? String { message.pushContent = pushContent }
        switch object["replaceDisablePush"] {
        case let flag as Bool: message.disableNotification = flag
        case let text as String: message.disableNotification = text == "true" || text == "1"
        default: break
        }
        if let pushExt = object["replacePushExt"] as? String, !pushExt.isEmpty {
            guard let config = (try? MessagePushConfig.decode(Data(pushExt.utf8))) ?? nil, (try? config.validate()) != nil else {
                return .failure(.answer("replacePushExt is not a valid push config"))
            }
            message.pushConfig = config.encoded()
        }
        if let extra = object["replaceExtraContent"] as? String, !extra.isEmpty, message.canIncludeExpansion {
            guard let expansion = (try? JSONSerialization.jsonObject(with: Data(extra.utf8))) as? [String: String],
                  (try? ExpansionLimits.check(set: expansion, remove: [])) != nil else {
                return .failure(.answer("replaceExtraContent is not an object of string keys and values within the extension limits"))
            }
            message.expansion = expansion
        }
        return .success(.deliver(message))
    }

    // MARK: held back

    /// RongCloud's RCMessageBlockType: why a message was held back.
    enum BlockType: Int32 {
        case customSensitiveWord = 2
        case messageCallback = 3
    }

    /// A message was held back: routed when the app routes blocked messages (sensitive words
    /// only; RongCloud never routes what its message callback refused), and the sender's device told
    /// when the app asks for the notice.
    func held(_ message: StoredMessage, by type: BlockType, extra: String, session: ClientSession?) async {
        guard let settings = try? await settings(appId: message.appId) else { return }
        if type == .customSensitiveWord, let record = routingRecord(message, settings: settings, sensitivity: .blocked) {
            takeOnSoon([record])
        }
        guard settings.blockNotice, let session else { return }
        var notice = Im_MessageBlocked()
        notice.conversationType = Int32(message.conversationType.rawValue)
        notice.targetID = message.targetId
        notice.channelID = message.channelId
        notice.messageUid = message.uid
        notice.blockType = type.rawValue
        notice.extra = extra
        notice.sentTime = message.sentTime
        if let frame = try? FrameCodec.push(op: .messageBlocked, notice) { _ = session.send(frame) }
    }
}
