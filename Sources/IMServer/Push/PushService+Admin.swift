import Foundation
import IMCore
import IMStore

/// What the Server API reads and changes of an app's push data: templates, remarks, records.
extension PushService {
    public func setTemplate(_ template: PushTemplateRecord, appId: Int64) async throws {
        try await store.upsertPushTemplate(appId: appId, template: template, maxTemplates: PushLimits.maxTemplatesPerApp)
    }

    public func deleteTemplate(_ templateId: String, appId: Int64) async throws -> Bool {
        try await store.deletePushTemplate(appId: appId, templateId: templateId)
    }

    public func templates(appId: Int64) async throws -> [PushTemplateRecord] {
        try await store.pushTemplates(appId: appId)
    }

    /// Sets (or, with an empty remark, removes) the names `userId` gives others.
    public func setRemarks(_ remarks: [String: String], userId: String, appId: Int64) async throws {
        try await store.setRemarks(appId: appId, userId: userId, remarks: remarks)
    }

    /// Sets (or, with an empty remark, removes) the name `userId` shows as the sender of the
    /// group's pushes to its other members (RongCloud's group member push alias).
    public func setGroupRemark(_ remark: String, groupId: String, userId: String, appId: Int64) async throws {
        try await store.setGroupRemark(appId: appId, groupId: groupId, userId: userId, remark: remark)
    }

    public func groupRemark(groupId: String, userId: String, appId: Int64) async throws -> String? {
        try await store.groupRemark(appId: appId, groupId: groupId, userId: userId)
    }

    /// Every remark `userId` gave, by user id.
    public func remarks(userId: String, appId: Int64) async throws -> [(userId: String, remark: String)] {
        var all: [(userId: String, remark: String)] = []
        var after = ""
        while true {
            let chunk = try await store.remarks(appId: appId, userId: userId, afterUserId: after, limit: 1_000)
            all += chunk
            guard chunk.count == 1_000, let last = chunk.last else { return all }
            after = last.userId
        }
    }

    /// The troubleshooting view: records of a message or a user (newest first), and the user's devices.
    public func records(appId: Int64, messageUid: String?, userId: String?, limit: Int) async throws
        -> (records: [PushRecord], devices: [PushDeviceRecord]?) {
        let records = try await store.pushRecords(appId: appId, messageUid: messageUid, userId: userId, limit: limit)
        guard let userId else { return (records, nil) }
        return (records, try await store.pushDevices(appId: appId, userIds: [userId]))
    }
}
