import Logging
import ServiceLifecycle

/// Runs the message log's writer (`MessageLog.runWriter`) for the life of the server. On graceful
/// shutdown it drains the log: everything appended so far is committed and its senders answered
/// (if the store fails, they are told so: nothing is acknowledged that is not stored), later
/// appends are refused with 31003, and then `run` returns. Cancelled, it still answers every
/// sender waiting.
struct MessageLogService: Service {
    let log: MessageLog
    let logger: Logger

    func run() async {
        let (committed, failed) = await withGracefulShutdownHandler {
            await log.runWriter()
        } onGracefulShutdown: {
            log.stopWriting()
        }
        if failed == 0 {
            logger.notice("message log drained: every message it accepted is committed and answered",
                          metadata: ["committedWhileStopping": "\(committed)"])
        } else {
            logger.error("message log drained, but the store refused messages: their senders were told they were not stored",
                         metadata: ["committedWhileStopping": "\(committed)", "notStored": "\(failed)"])
        }
    }
}
