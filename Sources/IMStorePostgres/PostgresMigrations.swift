import Foundation
import Logging
import PostgresNIO

/// The schema, as numbered migrations recorded in `imserver_migrations`.
///
/// Tables and columns are named as the embedded store's are after all its migrations, with
/// PostgreSQL's types for SQLite's (BIGINT for INTEGER, flags included; BYTEA for BLOB; TEXT with
/// the "C" collation, so that ids compare and sort bytewise as in SQLite), so `imserver migrate`
/// copies a SQLite installation table by table. What PostgreSQL adds: `imserver_counters` (the seq
/// counters, see `PostgresStore`) and `imserver_migrations`.
///
/// Migrations run under a session advisory lock: several nodes starting together on a new database
/// migrate it once, one after another; each migration is one transaction.
enum PostgresMigrations {
    struct Migration {
        let version: Int64
        let name: String
        let statements: [String]
    }

    /// Text compared bytewise, as SQLite compares it.
    private static let text = #"TEXT COLLATE "C""#

    static let all: [Migration] = [
        Migration(version: 1, name: "schema", statements: schema),
        Migration(version: 2, name: "commit in one statement", statements: [commitFunctionV2]),
        Migration(version: 3, name: "push", statements: push),
        Migration(version: 4, name: "callbacks", statements: callbacks),
        Migration(version: 5, name: "accounts", statements: accounts),
        Migration(version: 6, name: "group remarks", statements: groupRemarks),
        Migration(version: 7, name: "app ban", statements: ["ALTER TABLE apps ADD COLUMN banned BIGINT NOT NULL DEFAULT 0"]),
        Migration(version: 8, name: "operations", statements: operations),
        Migration(version: 9, name: "media", statements: media),
    ]

    /// The embedded store's v17-media (`SQLiteStore.createMediaTables`).
    private static let media: [String] = [
        """
        CREATE TABLE media_files (
            app_id BIGINT NOT NULL, file_id \(text) NOT NULL, user_id \(text) NOT NULL, media_type \(text) NOT NULL,
            name \(text) NOT NULL, mime_type \(text) NOT NULL, size BIGINT NOT NULL, created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, file_id)
        )
        """,
        "CREATE INDEX media_files_by_expiry ON media_files (expires_at)",
    ]

    /// The embedded store's v16-operations (`SQLiteStore.createOperationsTables`).
    private static let operations: [String] = [
        "ALTER TABLE apps ADD COLUMN settings \(text) NOT NULL DEFAULT '{}'",
        """
        CREATE TABLE app_daily_stats (
            app_id BIGINT NOT NULL, day \(text) NOT NULL, name \(text) NOT NULL, value BIGINT NOT NULL,
            PRIMARY KEY (app_id, day, name)
        )
        """,
        """
        CREATE TABLE app_daily_users (
            app_id BIGINT NOT NULL, day \(text) NOT NULL, user_id \(text) NOT NULL,
            PRIMARY KEY (app_id, day, user_id)
        )
        """,
        "CREATE INDEX app_daily_users_by_day ON app_daily_users (day)",
        """
        CREATE TABLE console_operators (
            name \(text) PRIMARY KEY, password_hash \(text) NOT NULL, changed_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE console_sessions (
            token_hash \(text) PRIMARY KEY, operator_name \(text) NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL
        )
        """,
    ]

    /// The embedded store's v14-group-remarks.
    private static let groupRemarks: [String] = [
        """
        CREATE TABLE group_remarks (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, user_id \(text) NOT NULL, remark \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id, user_id)
        )
        """,
        "CREATE INDEX group_remarks_by_user ON group_remarks (app_id, user_id)",
    ]

    /// The embedded store's v13-accounts (`SQLiteStore.createAccountTables`).
    private static let accounts: [String] = [
        "ALTER TABLE users ADD COLUMN deleted_at BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE users ADD COLUMN deactivated_at BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE users ADD COLUMN history_after_seq BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE users ADD COLUMN private_muted_at BIGINT NOT NULL DEFAULT 0",
        "CREATE INDEX users_by_created ON users (app_id, created_at, user_id)",
        "CREATE INDEX users_deactivated ON users (app_id, deactivated_at, user_id) WHERE deactivated_at > 0",
        "CREATE INDEX users_private_muted ON users (app_id, user_id) WHERE private_muted_at > 0",
        """
        CREATE TABLE user_profiles (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL,
            profile \(text) NOT NULL, ext_profile \(text) NOT NULL, version BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id)
        )
        """,
    ]

    /// The embedded store's v12-callbacks (`SQLiteStore.createCallbackTables`).
    private static let callbacks: [String] = [
        "CREATE TABLE callback_settings (app_id BIGINT PRIMARY KEY, settings BYTEA NOT NULL)",
        """
        CREATE TABLE callback_outbox (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            app_id BIGINT NOT NULL, kind BIGINT NOT NULL, order_key \(text) NOT NULL, dedup_key \(text) NOT NULL,
            body BYTEA NOT NULL, attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL, created_at BIGINT NOT NULL,
            last_error \(text) NOT NULL
        )
        """,
        "CREATE UNIQUE INDEX callback_outbox_by_dedup ON callback_outbox (app_id, kind, dedup_key)",
        "CREATE INDEX callback_outbox_by_app ON callback_outbox (app_id, id)",
        "CREATE INDEX callback_outbox_by_time ON callback_outbox (created_at)",
        "CREATE TABLE callback_cursors (node \(text) PRIMARY KEY, seq BIGINT NOT NULL)",
    ]

    /// The embedded store's v11-push: the messages' `push_config`, which the commit function now
    /// stores, and the push tables (`SQLiteStore.createPushTables`).
    private static let push: [String] = [
        "ALTER TABLE messages ADD COLUMN push_config BYTEA NOT NULL DEFAULT ''::bytea",
        """
        DROP FUNCTION imserver_commit_messages(BIGINT[], BIGINT[], TEXT[], TEXT[], TEXT[], TEXT[], BYTEA[], TEXT[], BIGINT[],
            BIGINT[], BIGINT[], TEXT[], TEXT[], TEXT[], BIGINT[], BIGINT[], TEXT[], TEXT[], BIGINT[], TEXT[], TEXT[], TEXT[])
        """,
        commitFunction,
        """
        CREATE TABLE push_devices (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, device_id \(text) NOT NULL, kind \(text) NOT NULL,
            token \(text) NOT NULL, environment \(text) NOT NULL, platform \(text) NOT NULL, badge BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id, device_id, kind)
        )
        """,
        "CREATE UNIQUE INDEX push_devices_by_token ON push_devices (app_id, kind, token)",
        """
        CREATE TABLE push_profiles (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, language \(text), show_content BIGINT NOT NULL,
            receive_web BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id)
        )
        """,
        """
        CREATE TABLE push_templates (
            app_id BIGINT NOT NULL, template_id \(text) NOT NULL, name \(text) NOT NULL, entries \(text) NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, template_id)
        )
        """,
        """
        CREATE TABLE user_remarks (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, target_id \(text) NOT NULL, remark \(text) NOT NULL,
            PRIMARY KEY (app_id, user_id, target_id)
        )
        """,
        """
        CREATE TABLE push_settings (
            app_id BIGINT PRIMARY KEY, settings BYTEA NOT NULL
        )
        """,
        """
        CREATE TABLE push_records (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            app_id BIGINT NOT NULL, message_uid \(text) NOT NULL, user_id \(text) NOT NULL, device_id \(text) NOT NULL,
            kind \(text), token \(text) NOT NULL, environment \(text) NOT NULL, notification BYTEA NOT NULL,
            status BIGINT NOT NULL, code \(text) NOT NULL, attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL,
            created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL
        )
        """,
        "CREATE UNIQUE INDEX push_records_by_decision ON push_records (app_id, message_uid, user_id, device_id)",
        "CREATE INDEX push_records_pending ON push_records (next_attempt_at, id) WHERE status = 0",
        "CREATE INDEX push_records_by_user ON push_records (app_id, user_id, id)",
        "CREATE INDEX push_records_by_time ON push_records (created_at)",
        """
        CREATE TABLE push_cursors (
            node \(text) PRIMARY KEY, seq BIGINT NOT NULL
        )
        """,
    ]

    /// The message log's commit as one call (`PostgresStore.commit`): the commit's reads and its
    /// insert run in PostgreSQL, after the counter row's lock, in one round trip, so that the lock
    /// every node's commits queue on is held for the work and the WAL flush, not for round trips
    /// to a node (which may be busy). Each statement of a PL/pgSQL function takes a new snapshot
    /// (READ COMMITTED), so the statement after the lock sees every commit that held it before.
    ///
    /// Arguments: the batch's messages column by column (no two with the same client message id;
    /// NULL columns as ''). For each message, in the batch's order (`r_ord`, from 1): its seq and
    /// its sentTime (moved past its conversation's newest when not after it), or the uid of the
    /// message stored already with its client message id (`r_stored_uid`; nothing stored then).
    ///
    /// A conversation's sentTimes: s'(k) = max(s(k), s'(k-1) + 1) with s'(-1) its newest stored,
    /// which is k + max(newest + 1, max over j <= k of s(j) - j): one window over the batch.
    ///
    /// Its statements are planned on every call (`force_custom_plan`): a plan cached while the
    /// messages table was small, before autovacuum analyzes it, scans the table for each lookup;
    /// on a new database that made each commit cost more as the table grew (22 ms for 17 messages
    /// instead of 0.9) and the cluster fell behind until the next ANALYZE.
    ///
    /// Migration 3's: migration 2's (`commitFunctionV2`) with `p_push_config`.
    static let commitFunction = """
        CREATE FUNCTION imserver_commit_messages(
            p_app_id BIGINT[], p_conv_type BIGINT[], p_conv_key TEXT[], p_target_id TEXT[], p_sender_id TEXT[],
            p_object_name TEXT[], p_content BYTEA[], p_uid TEXT[], p_sent_time BIGINT[], p_flags BIGINT[],
            p_in_history BIGINT[], p_client_msg_id TEXT[], p_push_content TEXT[], p_push_data TEXT[],
            p_disable_notification BIGINT[], p_can_include_expansion BIGINT[], p_expansion TEXT[], p_channel_id TEXT[],
            p_include_sender BIGINT[], p_audience TEXT[], p_expansion_times TEXT[], p_mentioned TEXT[], p_push_config BYTEA[])
        RETURNS TABLE (r_ord BIGINT, r_seq BIGINT, r_sent_time BIGINT, r_stored_uid TEXT)
        LANGUAGE plpgsql VOLATILE
        SET plan_cache_mode = force_custom_plan
        AS $fn$
        DECLARE
            top BIGINT;
        BEGIN
            SELECT c.value INTO top FROM imserver_counters c WHERE c.name = 'message_seq' FOR UPDATE;
            RETURN QUERY
            WITH batch AS (
                SELECT * FROM unnest(p_app_id, p_conv_type, p_conv_key, p_target_id, p_sender_id, p_object_name, p_content,
                                     p_uid, p_sent_time, p_flags, p_in_history, p_client_msg_id, p_push_content, p_push_data,
                                     p_disable_notification, p_can_include_expansion, p_expansion, p_channel_id,
                                     p_include_sender, p_audience, p_expansion_times, p_mentioned, p_push_config) WITH ORDINALITY
                    AS t(app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid, sent_time, flags,
                         in_history, client_msg_id, push_content, push_data, disable_notification, can_include_expansion,
                         expansion, channel_id, include_sender, audience, expansion_times, mentioned, push_config, ord)
            ), stored AS (
                SELECT b.ord, m.uid FROM batch b
                CROSS JOIN LATERAL (
                    SELECT x.uid FROM messages x
                    WHERE x.app_id = b.app_id AND x.sender_id = b.sender_id AND x.client_msg_id = b.client_msg_id
                      AND x.client_msg_id <> ''
                    LIMIT 1) AS m
                WHERE b.client_msg_id <> ''
            ), fresh AS (
                SELECT b.*, row_number() OVER (ORDER BY b.ord) AS n,
                       row_number() OVER (PARTITION BY b.app_id, b.conv_key ORDER BY b.ord) - 1 AS k
                FROM batch b WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.ord = b.ord)
            ), newest AS (
                SELECT c.app_id, c.conv_key,
                       (SELECT MAX(x.sent_time) FROM messages x WHERE x.app_id = c.app_id AND x.conv_key = c.conv_key) AS time
                FROM (SELECT DISTINCT f.app_id, f.conv_key FROM fresh f) AS c
            ), placed AS (
                SELECT f.*, top + f.n AS new_seq,
                       f.k + GREATEST(COALESCE(l.time + 1, -9223372036854775807),
                                      MAX(f.sent_time - f.k) OVER (PARTITION BY f.app_id, f.conv_key ORDER BY f.ord
                                                                   ROWS UNBOUNDED PRECEDING)) AS new_sent_time
                FROM fresh f JOIN newest l ON l.app_id = f.app_id AND l.conv_key = f.conv_key
            ), inserted AS (
                INSERT INTO messages (seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                    sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                    can_include_expansion, expansion, channel_id, include_sender, audience, expansion_times, mentioned, push_config)
                SELECT p.new_seq, p.app_id, p.conv_type, p.conv_key, p.target_id, p.sender_id, p.object_name, p.content, p.uid,
                    p.new_sent_time, p.flags, p.in_history, p.client_msg_id, p.push_content, p.push_data,
                    p.disable_notification, p.can_include_expansion, NULLIF(p.expansion, ''), p.channel_id,
                    p.include_sender, NULLIF(p.audience, ''), NULLIF(p.expansion_times, ''), NULLIF(p.mentioned, ''), p.push_config
                FROM placed p
                RETURNING 1
            ), counted AS (
                UPDATE imserver_counters SET value = top + (SELECT count(*) FROM placed) WHERE name = 'message_seq'
                RETURNING 1
            )
            SELECT p.ord, p.new_seq, p.new_sent_time, NULL::TEXT FROM placed p
            UNION ALL
            SELECT s.ord, NULL::BIGINT, NULL::BIGINT, s.uid FROM stored s;
        END
        $fn$
        """


    /// Migration 2's commit, without `push_config` (replaced by `commitFunction` in migration 3).
    static let commitFunctionV2 = """
        CREATE FUNCTION imserver_commit_messages(
            p_app_id BIGINT[], p_conv_type BIGINT[], p_conv_key TEXT[], p_target_id TEXT[], p_sender_id TEXT[],
            p_object_name TEXT[], p_content BYTEA[], p_uid TEXT[], p_sent_time BIGINT[], p_flags BIGINT[],
            p_in_history BIGINT[], p_client_msg_id TEXT[], p_push_content TEXT[], p_push_data TEXT[],
            p_disable_notification BIGINT[], p_can_include_expansion BIGINT[], p_expansion TEXT[], p_channel_id TEXT[],
            p_include_sender BIGINT[], p_audience TEXT[], p_expansion_times TEXT[], p_mentioned TEXT[])
        RETURNS TABLE (r_ord BIGINT, r_seq BIGINT, r_sent_time BIGINT, r_stored_uid TEXT)
        LANGUAGE plpgsql VOLATILE
        SET plan_cache_mode = force_custom_plan
        AS $fn$
        DECLARE
            top BIGINT;
        BEGIN
            SELECT c.value INTO top FROM imserver_counters c WHERE c.name = 'message_seq' FOR UPDATE;
            RETURN QUERY
            WITH batch AS (
                SELECT * FROM unnest(p_app_id, p_conv_type, p_conv_key, p_target_id, p_sender_id, p_object_name, p_content,
                                     p_uid, p_sent_time, p_flags, p_in_history, p_client_msg_id, p_push_content, p_push_data,
                                     p_disable_notification, p_can_include_expansion, p_expansion, p_channel_id,
                                     p_include_sender, p_audience, p_expansion_times, p_mentioned) WITH ORDINALITY
                    AS t(app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid, sent_time, flags,
                         in_history, client_msg_id, push_content, push_data, disable_notification, can_include_expansion,
                         expansion, channel_id, include_sender, audience, expansion_times, mentioned, ord)
            ), stored AS (
                SELECT b.ord, m.uid FROM batch b
                CROSS JOIN LATERAL (
                    SELECT x.uid FROM messages x
                    WHERE x.app_id = b.app_id AND x.sender_id = b.sender_id AND x.client_msg_id = b.client_msg_id
                      AND x.client_msg_id <> ''
                    LIMIT 1) AS m
                WHERE b.client_msg_id <> ''
            ), fresh AS (
                SELECT b.*, row_number() OVER (ORDER BY b.ord) AS n,
                       row_number() OVER (PARTITION BY b.app_id, b.conv_key ORDER BY b.ord) - 1 AS k
                FROM batch b WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.ord = b.ord)
            ), newest AS (
                SELECT c.app_id, c.conv_key,
                       (SELECT MAX(x.sent_time) FROM messages x WHERE x.app_id = c.app_id AND x.conv_key = c.conv_key) AS time
                FROM (SELECT DISTINCT f.app_id, f.conv_key FROM fresh f) AS c
            ), placed AS (
                SELECT f.*, top + f.n AS new_seq,
                       f.k + GREATEST(COALESCE(l.time + 1, -9223372036854775807),
                                      MAX(f.sent_time - f.k) OVER (PARTITION BY f.app_id, f.conv_key ORDER BY f.ord
                                                                   ROWS UNBOUNDED PRECEDING)) AS new_sent_time
                FROM fresh f JOIN newest l ON l.app_id = f.app_id AND l.conv_key = f.conv_key
            ), inserted AS (
                INSERT INTO messages (seq, app_id, conv_type, conv_key, target_id, sender_id, object_name, content, uid,
                    sent_time, flags, in_history, client_msg_id, push_content, push_data, disable_notification,
                    can_include_expansion, expansion, channel_id, include_sender, audience, expansion_times, mentioned)
                SELECT p.new_seq, p.app_id, p.conv_type, p.conv_key, p.target_id, p.sender_id, p.object_name, p.content, p.uid,
                    p.new_sent_time, p.flags, p.in_history, p.client_msg_id, p.push_content, p.push_data,
                    p.disable_notification, p.can_include_expansion, NULLIF(p.expansion, ''), p.channel_id,
                    p.include_sender, NULLIF(p.audience, ''), NULLIF(p.expansion_times, ''), NULLIF(p.mentioned, '')
                FROM placed p
                RETURNING 1
            ), counted AS (
                UPDATE imserver_counters SET value = top + (SELECT count(*) FROM placed) WHERE name = 'message_seq'
                RETURNING 1
            )
            SELECT p.ord, p.new_seq, p.new_sent_time, NULL::TEXT FROM placed p
            UNION ALL
            SELECT s.ord, NULL::BIGINT, NULL::BIGINT, s.uid FROM stored s;
        END
        $fn$
        """

    /// The final schema of the embedded store (its migrations v1 to v10), in PostgreSQL's types.
    private static let schema: [String] = [
        """
        CREATE TABLE imserver_counters (
            name \(text) PRIMARY KEY,
            value BIGINT NOT NULL
        )
        """,
        // The message log's seqs and the read receipts' seqs (see `PostgresStore`).
        "INSERT INTO imserver_counters (name, value) VALUES ('message_seq', 0), ('read_seq', 0)",
        """
        CREATE TABLE apps (
            id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            app_key \(text) NOT NULL UNIQUE,
            app_secret \(text) NOT NULL,
            name \(text) NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE users (
            app_id BIGINT NOT NULL REFERENCES apps(id),
            user_id \(text) NOT NULL,
            name \(text) NOT NULL DEFAULT '',
            portrait_uri \(text) NOT NULL DEFAULT '',
            created_at BIGINT NOT NULL,
            tokens_valid_after BIGINT NOT NULL DEFAULT 0,
            blocked_until BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (app_id, user_id)
        )
        """,
        "CREATE INDEX users_blocked ON users (app_id, blocked_until) WHERE blocked_until > 0",
        """
        CREATE TABLE messages (
            seq BIGINT PRIMARY KEY,
            app_id BIGINT NOT NULL,
            conv_type BIGINT NOT NULL,
            conv_key \(text) NOT NULL,
            target_id \(text) NOT NULL,
            sender_id \(text) NOT NULL,
            object_name \(text) NOT NULL,
            content BYTEA NOT NULL,
            uid \(text) NOT NULL UNIQUE,
            sent_time BIGINT NOT NULL,
            flags BIGINT NOT NULL,
            in_history BIGINT NOT NULL,
            client_msg_id \(text) NOT NULL,
            push_content \(text) NOT NULL,
            push_data \(text) NOT NULL,
            disable_notification BIGINT NOT NULL,
            can_include_expansion BIGINT NOT NULL,
            expansion \(text),
            channel_id \(text) NOT NULL,
            include_sender BIGINT NOT NULL DEFAULT 1,
            audience \(text),
            receipt_requested BIGINT NOT NULL DEFAULT 0,
            expansion_times \(text),
            mentioned \(text),
            modified_time BIGINT NOT NULL DEFAULT 0
        )
        """,
        "CREATE INDEX messages_by_conversation ON messages (app_id, conv_key, sent_time)",
        "CREATE INDEX messages_by_target ON messages (app_id, target_id, seq)",
        "CREATE INDEX messages_by_sender ON messages (app_id, sender_id, seq)",
        "CREATE UNIQUE INDEX messages_by_client_id ON messages (app_id, sender_id, client_msg_id) WHERE client_msg_id <> ''",
        "CREATE INDEX messages_by_time ON messages (app_id, sent_time)",
        "CREATE INDEX messages_modified ON messages (app_id, conv_key, modified_time) WHERE modified_time > 0",
        """
        CREATE TABLE user_lists (
            app_id BIGINT NOT NULL, owner \(text) NOT NULL, kind BIGINT NOT NULL, member \(text) NOT NULL,
            created_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, owner, kind, member)
        )
        """,
        """
        CREATE TABLE user_tags (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, tag \(text) NOT NULL,
            PRIMARY KEY (app_id, user_id, tag)
        )
        """,
        "CREATE INDEX user_tags_by_tag ON user_tags (app_id, tag, user_id)",
        """
        CREATE TABLE chat_groups (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, name \(text) NOT NULL, created_at BIGINT NOT NULL,
            dismissed_at BIGINT NOT NULL DEFAULT 0, created_seq BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (app_id, group_id)
        )
        """,
        """
        CREATE TABLE group_members (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, user_id \(text) NOT NULL, joined_at BIGINT NOT NULL,
            joined_seq BIGINT NOT NULL DEFAULT 0, history_after_seq BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (app_id, group_id, user_id)
        )
        """,
        "CREATE INDEX group_members_by_user ON group_members (app_id, user_id)",
        """
        CREATE TABLE group_mutes (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, user_id \(text) NOT NULL,
            since BIGINT NOT NULL, until BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id, user_id)
        )
        """,
        """
        CREATE TABLE muted_groups (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id)
        )
        """,
        """
        CREATE TABLE group_mute_whitelist (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, user_id \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id, user_id)
        )
        """,
        """
        CREATE TABLE sensitive_words (
            app_id BIGINT NOT NULL, word \(text) NOT NULL, replacement \(text), created_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, word)
        )
        """,
        """
        CREATE TABLE conversation_settings (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, conv_type BIGINT NOT NULL, target_id \(text) NOT NULL,
            channel_id \(text) NOT NULL, unpush_level BIGINT NOT NULL,
            is_top BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0, updated_at BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (app_id, user_id, conv_type, target_id, channel_id)
        )
        """,
        "CREATE INDEX conversation_settings_by_version ON conversation_settings (app_id, user_id, version)",
        """
        CREATE TABLE deleted_message_logs (
            app_id BIGINT NOT NULL, hour \(text) NOT NULL,
            PRIMARY KEY (app_id, hour)
        )
        """,
        """
        CREATE TABLE message_reads (
            seq BIGINT PRIMARY KEY,
            app_id BIGINT NOT NULL, uid \(text) NOT NULL, sender_id \(text) NOT NULL, group_id \(text) NOT NULL,
            reader_id \(text) NOT NULL, read_time BIGINT NOT NULL,
            UNIQUE (app_id, uid, reader_id)
        )
        """,
        "CREATE INDEX message_reads_by_sender ON message_reads (app_id, sender_id, seq)",
        "CREATE INDEX message_reads_by_message ON message_reads (app_id, uid, seq)",
        """
        CREATE TABLE conversation_state_users (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL,
            version BIGINT NOT NULL DEFAULT 0,
            quiet_start \(text), quiet_span BIGINT NOT NULL DEFAULT 0, quiet_level BIGINT NOT NULL DEFAULT 0,
            quiet_time_zone \(text), quiet_version BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (app_id, user_id)
        )
        """,
        """
        CREATE TABLE conversation_tags (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, tag_id \(text) NOT NULL,
            name \(text) NOT NULL, created_at BIGINT NOT NULL,
            removed BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id, tag_id)
        )
        """,
        "CREATE INDEX conversation_tags_by_version ON conversation_tags (app_id, user_id, version)",
        """
        CREATE TABLE conversation_tag_links (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, tag_id \(text) NOT NULL,
            conv_type BIGINT NOT NULL, target_id \(text) NOT NULL, channel_id \(text) NOT NULL,
            is_top BIGINT NOT NULL DEFAULT 0, linked_at BIGINT NOT NULL,
            removed BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id, tag_id, conv_type, target_id, channel_id)
        )
        """,
        "CREATE INDEX conversation_tag_links_by_version ON conversation_tag_links (app_id, user_id, version)",
        """
        CREATE TABLE hidden_messages (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, uid \(text) NOT NULL,
            PRIMARY KEY (app_id, user_id, uid)
        )
        """,
        """
        CREATE TABLE cleared_conversations (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, conv_key \(text) NOT NULL, cleared_through BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id, conv_key)
        )
        """,
        """
        CREATE TABLE chatroom_settings (
            app_id BIGINT NOT NULL, kind \(text) NOT NULL, room_id \(text) NOT NULL, item \(text) NOT NULL,
            until BIGINT NOT NULL,
            PRIMARY KEY (app_id, kind, room_id, item)
        )
        """,
        """
        CREATE TABLE chatroom_messages (
            seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            app_id BIGINT NOT NULL, room_id \(text) NOT NULL, sender_id \(text) NOT NULL, object_name \(text) NOT NULL,
            content BYTEA NOT NULL, uid \(text) NOT NULL, sent_time BIGINT NOT NULL, flags BIGINT NOT NULL,
            client_msg_id \(text) NOT NULL
        )
        """,
        "CREATE UNIQUE INDEX chatroom_messages_by_uid ON chatroom_messages (app_id, uid)",
        "CREATE INDEX chatroom_messages_by_room ON chatroom_messages (app_id, room_id, sent_time)",
        "CREATE INDEX chatroom_messages_by_time ON chatroom_messages (sent_time)",
        """
        CREATE TABLE ultra_groups (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, name \(text) NOT NULL,
            created_at BIGINT NOT NULL, created_seq BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id)
        )
        """,
        """
        CREATE TABLE ultra_group_members (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, user_id \(text) NOT NULL,
            joined_at BIGINT NOT NULL, joined_seq BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id, user_id)
        )
        """,
        "CREATE INDEX ultra_group_members_by_user ON ultra_group_members (app_id, user_id)",
        """
        CREATE TABLE ultra_group_channels (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL, type BIGINT NOT NULL,
            created_at BIGINT NOT NULL, created_seq BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id, channel_id)
        )
        """,
        """
        CREATE TABLE ultra_group_channel_members (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL, user_id \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id, channel_id, user_id)
        )
        """,
        """
        CREATE TABLE ultra_group_user_groups (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, user_group_id \(text) NOT NULL, created_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id, user_group_id)
        )
        """,
        """
        CREATE TABLE ultra_group_user_group_members (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, user_group_id \(text) NOT NULL, user_id \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id, user_group_id, user_id)
        )
        """,
        """
        CREATE TABLE ultra_group_channel_bindings (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL, user_group_id \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id, channel_id, user_group_id)
        )
        """,
        """
        CREATE TABLE ultra_group_mutes (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL, user_id \(text) NOT NULL,
            until BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id, channel_id, user_id)
        )
        """,
        """
        CREATE TABLE ultra_group_muted_channels (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id, channel_id)
        )
        """,
        """
        CREATE TABLE ultra_group_mute_whitelist (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL, user_id \(text) NOT NULL,
            PRIMARY KEY (app_id, group_id, channel_id, user_id)
        )
        """,
        """
        CREATE TABLE ultra_group_reads (
            app_id BIGINT NOT NULL, user_id \(text) NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL,
            read_time BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id, group_id, channel_id)
        )
        """,
        """
        CREATE TABLE ultra_group_unpush_levels (
            app_id BIGINT NOT NULL, group_id \(text) NOT NULL, channel_id \(text) NOT NULL, level BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id, channel_id)
        )
        """,
    ]

    /// The advisory lock the migrating node holds (a constant: one per database).
    private static let lockKey: Int64 = 0x696D_7365_7276_6572  // "imserver"

    /// Applies the migrations the database has not had, under the migration lock.
    static func run(on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.run("SELECT pg_advisory_lock(\(lockKey))", logger)
        do {
            try await connection.run("""
                CREATE TABLE IF NOT EXISTS imserver_migrations (
                    version BIGINT PRIMARY KEY,
                    name TEXT NOT NULL,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """, logger)
            var applied = Set<Int64>()
            for row in try await connection.rows("SELECT version FROM imserver_migrations", logger) {
                var cells = Cells(row)
                applied.insert(try cells.int())
            }
            for migration in all where !applied.contains(migration.version) {
                try await connection.run("BEGIN", logger)
                do {
                    for statement in migration.statements {
                        try await connection.run(PostgresQuery(unsafeSQL: statement), logger)
                    }
                    try await connection.run(
                        "INSERT INTO imserver_migrations (version, name) VALUES (\(migration.version), \(migration.name))", logger)
                    try await connection.run("COMMIT", logger)
                } catch {
                    _ = try? await connection.run("ROLLBACK", logger)
                    throw error
                }
                logger.notice("PostgreSQL migration \(migration.version) (\(migration.name)) applied")
            }
        } catch {
            _ = try? await connection.run("SELECT pg_advisory_unlock(\(lockKey))", logger)
            throw error
        }
        try await connection.run("SELECT pg_advisory_unlock(\(lockKey))", logger)
    }
}
