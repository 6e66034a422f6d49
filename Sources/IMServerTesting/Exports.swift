// The local push providers (APNs, FCM, webhooks) are in IMPushTesting, apart from Swift Testing so
// that imbench can run them too; the tests see them through this module.
@_exported import IMPushTesting
