import IMCore

extension Message {
    /// The body of a message whose object name this client has no registered type for (its
    /// `content` is nil): the object name, the raw JSON and the flags it came with. Nil when the
    /// content decoded.
    ///
    /// Such messages are kept as received: stored and counted as their flags say, so an app that
    /// registers the type in a later version still has them.
    public var unknownContent: UnknownMessageContent? {
        content == nil ? UnknownMessageContent(objectName: objectName, data: contentData, persistentFlag: flags) : nil
    }
}
