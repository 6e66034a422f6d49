import IMCore

extension Im_ConversationRef {
    public init(_ conversation: ConversationIdentifier) {
        self.init()
        conversationType = Int32(conversation.type.rawValue)
        targetID = conversation.targetId
        channelID = conversation.channelId
    }

    /// The conversation, or 33003 for a type number RongCloud does not define.
    public func identifier() throws -> ConversationIdentifier {
        guard let type = ConversationType(rawValue: Int(conversationType)) else {
            throw IMError(.invalidParameter, "unknown conversation type \(conversationType)")
        }
        return ConversationIdentifier(type, targetId: targetID, channelId: channelID)
    }
}
