// English and Chinese. The browser's language decides, the header button switches, and
// the choice is remembered in this browser.

const en = {
  skip: 'Skip to content', loading: 'Loading…', other_lang: '中文', other_lang_name: 'Switch to Chinese',
  nav_review: 'Review', nav_library: 'Cards', nav_tools: 'Tools', nav_services: 'Services', nav_butler: 'Butler',
  nav_mcp: 'MCP', nav_packages: 'Packages', nav_diagnostics: 'Diagnostics',
  review_title: 'Awaiting your review', review_empty: 'Nothing awaits review.',
  op_create: 'new card', op_revise: 'revises', op_archive: 'archives',
  approve: 'Approve', reject: 'Reject', reject_reason: 'Reason for rejecting (optional)', approving: 'Approving…',
  rejecting: 'Rejecting…', approved: 'Approved as {id} (revision {rev}).', rejected: 'Rejected.',
  failed: 'Failed: {msg}', not_retried: 'Nothing was retried; the candidate stays in the queue.',
  evidence: 'Evidence', checks: 'Checks', check_ok: 'holds', check_failed: 'fails', check_unknown: 'not evaluated', conflict: 'Conflict',
  diff: 'Changes against the current card', current_gone: 'The current card is gone.', applies_to: 'Applies to',
  tags: 'Tags', body: 'Body', decided: 'Decided', no_checks: 'No checks.',
  library_title: 'Card library', search: 'Search', search_cards: 'Search cards', kind: 'Kind', all_kinds: 'All kinds',
  library_hint: 'Every card, including suspended and archived ones. Type a word to search them.',
  library_count: '{n} cards', show_more: 'Show more ({n} left)', held_because: 'Suspended — a check failed:',
  held_no_reason: 'Its checks could not be evaluated.',
  card_edit: 'Edit', card_archive: 'Archive', card_archive_question: 'Archive this card? Agents will no longer find it.',
  card_archive_confirm: 'Archive it', card_history: 'History', card_no_history: 'No approved change on record (the card was written by hand).', card_revision: 'Revision', card_change: 'Change', card_by: 'By',
  card_by_owner: 'you', card_by_agent: 'agent, approved by you', card_saved: 'Saved as revision {rev}.',
  card_archived: 'Archived (revision {rev}).', card_stale: 'The card changed since you opened it; nothing was saved. Close and reopen it. ({msg})',
  card_pending: '{n} candidate(s) awaiting review would change this card.',
  field_title: 'Title', field_summary: 'Summary', field_appliesTo: 'Applies to', field_tags: 'Tags (comma-separated)', field_body: 'Body (Markdown)',
  decided_owner: 'your edit',
  library_recent: 'Recently approved', no_cards: 'No card matches.', status_active: 'active',
  status_archived: 'archived', status_suspended: 'suspended', revision: 'revision', more_results: 'Showing the first {n}.',
  tools_title: 'Tools', services_title: 'Services',
  tools_empty: 'No tools yet. Add one as a folder with a butler.json (kind "tool") under tools/ in your instance; it appears here by itself.',
  services_empty: 'No services yet. Add one as a folder with a butler.json (kind "service") under services/ in your instance; it appears here by itself.',
  show_all: 'Show all', show_resident: 'Show resident', manage: 'Manage display · stored {n}',
  search_items: 'Search by name, id or description', reset_order: 'Reset order', stored_mark: 'stored',
  start: 'Start', stop: 'Stop', restart: 'Restart', logs: 'Logs', menu: 'More', store_item: 'Store away',
  connect: 'Connect', disconnect: 'Log out', login_needed: 'Needs a login: {why}', open_login: 'Open the login page',
  login_waiting: 'Waiting for the login to finish…', login_done: 'Connected', logged_in_at: 'Logged in at {issuer}',
  logins_title: 'Logins needed', logins_connect: 'Connect it in the MCP view',
  pin_item: 'Keep resident', move_earlier: 'Move earlier', move_later: 'Move later',
  uptime: 'up {d}', cpu: 'CPU {p}%', rss: '{mb} MB', last_exit: 'exited {code} {t}', last_exit_stopped: 'stopped (exit {code}) {t}',
  decided_title: 'Decided', decided_card: 'Card', decided_outcome: 'Outcome', decided_when: 'When', decided_reason: 'Reason',
  decided_approved: 'approved', decided_rejected: 'rejected',
  problems: '{n} problems', details: 'Details', details_title: '{name}: details',
  detail_command: 'Command', detail_cwd: 'Folder', detail_pid: 'PID', detail_port: 'Port', detail_health: 'Health', detail_restart: 'Restart policy',
  details_history: 'Last runs', details_started: 'Started', details_ended: 'Ended', details_exit: 'Exit', details_stopped: 'stopped ({code})', details_no_runs: 'No run has ended yet.',
  log_filter: 'Filter lines', log_stderr_only: 'stderr only', log_pause: 'Pause', log_resume: 'Resume', log_download: 'Download',
  restarts: '{n} restarts', next_restart: 'restarts at {t}', low_frequency: 'Rarely used ({n})',
  ungrouped: 'Other', drag_hint: 'Drag cards (or Alt+↑/↓) to reorder.',
  drawer_title: 'Manage display', drawer_help: 'Ticked items stay resident on the board; the rest are stored away.',
  save: 'Save', cancel: 'Cancel', saving: 'Saving…', saved: 'Saved.', save_failed: 'Not saved: {msg}. Your draft is kept.',
  resident: 'resident',
  close: 'Close', log_title: 'Log · {name}', log_live: 'live', log_waiting: 'connecting…', log_skipped: '… {n} lines skipped',
  panel_title: '{name}', post_sent: '{label}: {status}', post_failed: '{label} failed: {msg}', opens_new_tab: '(opens a new tab)',
  action_failed: '{action} failed: {msg}',
  butler_title: 'Butler', faculty_state: 'State', commands: 'Commands', reports: 'Reports', report_failed: 'Report unavailable: {msg}',
  mcp_title: 'MCP', mcp_url: 'Paste this URL into your AI client', copy: 'Copy', copied: 'Copied.',
  providers: 'Providers', provider: 'Provider', namespace: 'Namespace', state: 'State', tools: 'Tools',
  rejected_names: 'Rejected names', conflicts: 'Conflicts', errors: 'Errors', last_error: 'Last error', none: 'none',
  held_by: 'held by {id}', calls: 'calls', host_tools: 'Host tools', sessions: 'Sessions',
  mcp_badge: 'MCP server · {state}', mcp_view: 'MCP view',
  state_stopped: 'stopped', state_starting: 'starting', state_running: 'running', state_healthy: 'healthy',
  state_unhealthy: 'unhealthy', state_backoff: 'backoff', state_restarting: 'restarting', state_stopping: 'stopping', state_crashed: 'crashed', state_unmanaged: 'unmanaged',
  state_idle: 'idle', state_ready: 'ready', state_failed: 'failed', state_registered: 'registered',
  report_ok: 'ok', report_attention: 'attention', report_warn: 'warning', report_error: 'error', report_unknown: 'unknown',
  job_outcome_ok: 'ok', job_outcome_failed: 'failed', job_distill: 'Distill · Butler',
  diagnostics_title: 'Catalog diagnostics', diagnostics_empty: 'Every manifest is fine.',
  nav_settings: 'Settings', settings_title: 'Settings', settings_editor: 'The root config (butler.json)',
  settings_owner_only: 'The settings are the owner\'s: open the console from a login link (`butler console`).',
  settings_intro: 'The instance\'s root config. A saved edit is in force at once for', settings_restart: 'These always wait for a restart:',
  settings_file_now: 'The file now', settings_valid: 'Valid: the host would take it.',
  settings_invalid: 'Problems: {n}. Nothing can be saved until they are fixed.',
  settings_not_json: 'not JSON: {msg}', settings_waiting: 'The running host keeps these until it restarts:',
  settings_save: 'Save', settings_revert: 'Revert', settings_saved: 'Saved, and in force.', settings_not_saved: 'Not saved.',
  settings_changed: 'Not saved: the file changed since this page read it. Copy your edit, reload the view, and make it again.',
  report_list_empty: 'Nothing yet.',
  severity_error: 'error — not registered', severity_warning: 'warning', severity_pending: 'pending',
  load_failed: 'Could not load: {msg}',
  automations_title: 'Automations', automations_register: 'Register automations',
  automations_hint: 'Jobs your agent runs on schedule (times in {tz}). Registering adds or updates Butler\'s own jobs; yours are never touched.',
  automations_no_agent: 'No agent is configured (agent.command in the root config), so nothing runs.',
  automations_registered: 'Registered: {added} added, {replaced} replaced, {kept} unchanged, {removed} retired removed.',
  automations_job: 'Job', automations_schedule: 'Schedule', automations_next: 'Next run', automations_last: 'Last run',
  automations_running: 'running now', automations_none: 'No automations registered.',
  logout: 'Log out', logging_out: 'Logging out…', logged_out: 'Logged out. Run `butler console` for a new login link.',
  sessions_title: 'Console sessions',
  sessions_hint: 'Each browser logged in to this console. A session ends after {idle} hours unused, and {days} days after its login at the latest.',
  sessions_browser: 'Browser', sessions_created: 'Logged in', sessions_last_used: 'Last used', sessions_ends: 'Ends',
  sessions_this: 'this session', sessions_end: 'End', sessions_ended: 'Session ended.',
  sessions_none: 'No console session is open.',
  sessions_need_login: 'Log in with a link from `butler console` to see the sessions.',
  confirm_title: 'Delegations awaiting your confirmation', confirm_hint: 'An agent proposed these results; the extension that asked gets one only when you confirm it.',
  confirm_run: 'Confirm', delegation: 'delegation', proposed_at: 'Proposed', run_confirmed: 'Confirmed: the result was handed over.', run_rejected: 'Rejected.',
  held_title: 'MCP items held for your approval', held_new: 'new', held_changed: 'changed since approved',
  held_hint: 'No client sees these tools, prompts, resources or skills, and none can use them, until you approve them.',
  approve_tool: 'Approve this definition', trust_provider: 'Trust {id} wholesale', held_approved: 'Approved.',
  approve_all: 'Approve all {n} of {id}', approve_all_lists: 'It approves exactly these, each as defined below:',
  held_of_provider: '{n} held', held_kind_tool: 'tool', held_kind_prompt: 'prompt',
  held_kind_resource: 'resource', held_kind_resourceTemplate: 'resource template', held_kind_skill: 'skill',
  held_kind_instructions: 'instructions',
  definition: 'Definition', definition_diff: 'Changes against the approved definition',
  actions: 'Actions', held_count: '{n} held for your approval —',
  mcp_tabs: 'MCP sections', activity: 'Activity',
  activity_hint: 'Every request the hub answered, newest first; new ones appear as they are answered. Arguments and results are never logged.',
  activity_name: 'Tool, prompt or URI', activity_name_hint: 'e.g. weather__*', any_outcome: 'Any outcome',
  apply: 'Apply', clear_filters: 'Clear filters', older: 'Older entries',
  col_time: 'Time', col_endpoint: 'Endpoint', col_method: 'Method', col_name: 'Name', col_ms: 'Duration',
  col_outcome: 'Outcome', col_sizes: 'Request → answer',
  outcome_ok: 'ok', outcome_error: 'error', outcome_tool_error: 'tool error', outcome_input_required: 'input required', outcome_cancelled: 'cancelled',
  activity_token: 'token {name}', activity_dropped: '{n} entries before this one were dropped (the log was busy)',
  activity_empty: 'No request answered yet.', activity_none_match: 'No entry matches these filters.',
  packages_title: 'Capability packages',
  packages_hint: 'Suzu Lives capability packages: importing checks a package and records it, nothing enabled; enabling offers its skill and its MCP server to your AI clients. Nothing in a package runs until you enable it.',
  packages_imported: 'Imported', packages_empty: 'No package imported yet.', package: 'Package', version: 'Version',
  adapters: 'Adapters', source: 'Source', enabled: 'enabled', not_enabled: 'not enabled', skill_files: 'skill: {n} files',
  import: 'Import', import_path: 'Path of a package (its folder, or its suzu-capability.json)',
  import_update: 'Update it if it is imported already', importing: 'Checking…',
  import_imported: 'Imported {id} {version} — not enabled.', import_updated: 'Updated {id} {version}:',
  import_unchanged: 'Nothing to update: {id} {version} is as imported.', import_failed: 'Not imported: {msg}',
  enable: 'Enable', disable: 'Disable', remove: 'Remove',
  plugins_title: 'ChatOS UI Apps plugins',
  plugins_hint: 'Folders with a plugin.json in a scan root. Each app\'s MCP server joins the hub (its tools held for your approval like any provider\'s), its prompt is offered to agents, and its profile exposes what the app selects.',
  plugins_empty: 'No plugin found.', plugin_refused: 'refused', plugin_problems: 'problems: {n}',
  plugin_backend: 'Backend', backend_available: 'available', backend_unavailable: 'unavailable',
  prompt: 'Prompt',
  app: 'App', mcp_server: 'MCP server', prompts: 'Prompts', profile: 'Profile',
  not_on_main: 'not on /mcp', not_on_sub: 'not on its profile',
};

const zh = {
  skip: '跳到内容', loading: '加载中…', other_lang: 'English', other_lang_name: '切换到英文',
  nav_review: '待确认', nav_library: '卡片库', nav_tools: '工具', nav_services: '服务', nav_butler: 'Butler',
  nav_mcp: 'MCP', nav_packages: '能力包', nav_diagnostics: '诊断',
  review_title: '等待你确认', review_empty: '没有待确认的候选。',
  automations_title: '自动任务', automations_register: '注册自动任务',
  automations_hint: '由你的智能体按计划运行的任务（时间按 {tz}）。注册会新增或更新 Butler 自己的任务，不会动你的任务。',
  automations_no_agent: '未配置智能体（根配置的 agent.command），不会运行任何任务。',
  automations_registered: '已注册：新增 {added}，替换 {replaced}，未变 {kept}，移除旧任务 {removed}。',
  automations_job: '任务', automations_schedule: '计划', automations_next: '下次运行', automations_last: '上次运行',
  automations_running: '正在运行', automations_none: '还没有注册自动任务。',
  logout: '退出登录', logging_out: '正在退出…', logged_out: '已退出登录。运行 `butler console` 获取新的登录链接。',
  sessions_title: '控制台会话',
  sessions_hint: '登录过本控制台的每个浏览器。会话闲置 {idle} 小时后结束，最迟在登录 {days} 天后结束。',
  sessions_browser: '浏览器', sessions_created: '登录于', sessions_last_used: '上次使用', sessions_ends: '结束于',
  sessions_this: '当前会话', sessions_end: '结束', sessions_ended: '会话已结束。',
  sessions_none: '没有打开的控制台会话。',
  sessions_need_login: '用 `butler console` 给出的链接登录后才能查看会话。',
  confirm_title: '等待你确认的委托结果', confirm_hint: '这些结果由智能体提出；只有你确认后，发起委托的扩展才会拿到。',
  confirm_run: '确认', delegation: '委托', proposed_at: '提出于', run_confirmed: '已确认：结果已交出。', run_rejected: '已拒绝。',
  held_title: '等待你批准的 MCP 条目', held_new: '新', held_changed: '批准后已改变',
  held_hint: '在你批准之前，没有客户端能看到或使用这些工具、提示、资源或技能。',
  approve_tool: '批准这个定义', trust_provider: '完全信任 {id}', held_approved: '已批准。',
  approve_all: '批准 {id} 的全部 {n} 项', approve_all_lists: '它只批准下面这些条目，定义见后：',
  held_of_provider: '{n} 项待批准', held_kind_tool: '工具', held_kind_prompt: '提示',
  held_kind_resource: '资源', held_kind_resourceTemplate: '资源模板', held_kind_skill: '技能',
  held_kind_instructions: '使用说明',
  definition: '定义', definition_diff: '与已批准定义的差异',
  actions: '操作', held_count: '{n} 个等待你批准 —',
  mcp_tabs: 'MCP 分区', activity: '活动',
  activity_hint: 'Hub 应答过的每个请求，最新的在前；新的请求一经应答就会出现。从不记录参数和结果。',
  activity_name: '工具、提示或 URI', activity_name_hint: '例如 weather__*', any_outcome: '全部结果',
  apply: '应用', clear_filters: '清除筛选', older: '更早的记录',
  col_time: '时间', col_endpoint: '端点', col_method: '方法', col_name: '名称', col_ms: '耗时',
  col_outcome: '结果', col_sizes: '请求 → 应答',
  outcome_ok: '成功', outcome_error: '错误', outcome_tool_error: '工具报错', outcome_input_required: '需要输入', outcome_cancelled: '已取消',
  activity_token: '令牌 {name}', activity_dropped: '此前有 {n} 条记录被丢弃（日志当时太忙）',
  activity_empty: '还没有应答过的请求。', activity_none_match: '没有符合这些筛选条件的记录。',
  packages_title: '能力包',
  packages_hint: 'Suzu Lives 能力包：导入会检查并记录扩展包，不会启用任何内容；启用后，它的 Skill 和 MCP 服务才会提供给你的 AI 客户端。启用之前，包里的任何内容都不会运行。',
  packages_imported: '已导入', packages_empty: '还没有导入任何能力包。', package: '能力包', version: '版本',
  adapters: '适配器', source: '来源', enabled: '已启用', not_enabled: '未启用', skill_files: 'Skill：{n} 个文件',
  import: '导入', import_path: '能力包的路径（它的文件夹，或其中的 suzu-capability.json）',
  import_update: '如已导入，则更新它', importing: '检查中…',
  import_imported: '已导入 {id} {version}，尚未启用。', import_updated: '已更新 {id} {version}：',
  import_unchanged: '无需更新：{id} {version} 与导入时相同。', import_failed: '未导入：{msg}',
  enable: '启用', disable: '停用', remove: '移除',
  plugins_title: 'ChatOS UI Apps 插件',
  plugins_hint: '扫描根目录中带有 plugin.json 的文件夹。每个应用的 MCP 服务会加入 Hub（和其他提供方一样，它的工具要等你批准），它的提示词会提供给智能体，它的 profile 暴露应用选择的内容。',
  plugins_empty: '没有找到插件。', plugin_refused: '已拒绝', plugin_problems: '问题：{n}',
  plugin_backend: '后端', backend_available: '可用', backend_unavailable: '不可用',
  prompt: '提示词',
  app: '应用', mcp_server: 'MCP 服务', prompts: '提示词', profile: 'Profile',
  not_on_main: '不在 /mcp 上', not_on_sub: '不在它的 profile 上',
  op_create: '新卡片', op_revise: '修订', op_archive: '归档',
  approve: '批准', reject: '拒绝', reject_reason: '拒绝理由（可选）', approving: '正在批准…', rejecting: '正在拒绝…',
  approved: '已批准为 {id}（修订 {rev}）。', rejected: '已拒绝。', failed: '失败：{msg}',
  not_retried: '没有自动重试；候选仍在队列中。',
  evidence: '证据', checks: '校验', check_ok: '成立', check_failed: '不成立', check_unknown: '未能执行', conflict: '冲突',
  diff: '与当前卡片的差异', current_gone: '当前卡片已不存在。', applies_to: '适用于', tags: '标签', body: '正文',
  decided: '已决定', no_checks: '无校验。',
  library_title: '卡片库', search: '搜索', search_cards: '搜索卡片', kind: '类型', all_kinds: '全部类型',
  library_hint: '所有卡片，包括已暂停和已归档的。输入关键词可搜索。', library_recent: '最近批准',
  library_count: '共 {n} 张卡片', show_more: '显示更多（还有 {n} 张）', held_because: '已暂停——校验未通过：',
  held_no_reason: '校验无法执行。',
  card_edit: '编辑', card_archive: '归档', card_archive_question: '归档这张卡片？智能体将不再能找到它。',
  card_archive_confirm: '确认归档', card_history: '历史', card_no_history: '没有已批准的变更记录（卡片是手工写入的）。', card_revision: '版本', card_change: '变更', card_by: '作者',
  card_by_owner: '你', card_by_agent: '智能体（经你批准）', card_saved: '已保存为第 {rev} 版。',
  card_archived: '已归档（第 {rev} 版）。', card_stale: '打开后卡片已被修改，未保存任何内容。请关闭后重新打开。（{msg}）',
  card_pending: '有 {n} 个待确认的候选会修改这张卡片。',
  field_title: '标题', field_summary: '摘要', field_appliesTo: '适用范围', field_tags: '标签（逗号分隔）', field_body: '正文（Markdown）',
  decided_owner: '你的编辑',
  no_cards: '没有匹配的卡片。', status_active: '生效', status_archived: '已归档', status_suspended: '已暂停',
  revision: '修订', more_results: '只显示前 {n} 条。',
  tools_title: '工具', services_title: '服务',
  tools_empty: '还没有工具。在实例的 tools/ 下放一个含 butler.json（kind 为 "tool"）的文件夹，它会自动出现在这里。',
  services_empty: '还没有服务。在实例的 services/ 下放一个含 butler.json（kind 为 "service"）的文件夹，它会自动出现在这里。',
  show_all: '显示全部', show_resident: '只显示常驻', manage: '管理显示 · 已收纳 {n}',
  search_items: '按名称、id 或描述搜索', reset_order: '重置顺序', stored_mark: '已收纳',
  start: '启动', stop: '停止', restart: '重启', logs: '日志', menu: '更多', store_item: '收纳',
  connect: '连接', disconnect: '退出登录', login_needed: '需要登录：{why}', open_login: '打开登录页',
  login_waiting: '等待登录完成…', login_done: '已连接', logged_in_at: '已登录 {issuer}',
  logins_title: '需要登录', logins_connect: '在 MCP 视图中连接',
  pin_item: '设为常驻', move_earlier: '前移', move_later: '后移',
  uptime: '已运行 {d}', cpu: 'CPU {p}%', rss: '{mb} MB', last_exit: '{t} 退出（{code}）', last_exit_stopped: '{t} 已停止（{code}）',
  decided_title: '已处理', decided_card: '卡片', decided_outcome: '结果', decided_when: '时间', decided_reason: '理由',
  decided_approved: '已批准', decided_rejected: '已拒绝',
  problems: '{n} 个问题', details: '详情', details_title: '{name}：详情',
  detail_command: '命令', detail_cwd: '目录', detail_pid: 'PID', detail_port: '端口', detail_health: '健康', detail_restart: '重启策略',
  details_history: '最近的运行', details_started: '开始', details_ended: '结束', details_exit: '退出码', details_stopped: '已停止（{code}）', details_no_runs: '还没有结束的运行。',
  log_filter: '筛选日志', log_stderr_only: '仅 stderr', log_pause: '暂停', log_resume: '继续', log_download: '下载',
  restarts: '重启 {n} 次', next_restart: '{t} 重启', low_frequency: '不常用（{n}）',
  ungrouped: '其他', drag_hint: '拖动卡片（或 Alt+↑/↓）调整顺序。',
  drawer_title: '管理显示', drawer_help: '勾选的项目常驻在面板上，其余收纳起来。',
  save: '保存', cancel: '取消', saving: '正在保存…', saved: '已保存。', save_failed: '未保存：{msg}。草稿已保留。',
  resident: '常驻',
  close: '关闭', log_title: '日志 · {name}', log_live: '实时', log_waiting: '连接中…', log_skipped: '… 跳过 {n} 行',
  panel_title: '{name}', post_sent: '{label}：{status}', post_failed: '{label} 失败：{msg}', opens_new_tab: '（在新标签页打开）',
  action_failed: '{action} 失败：{msg}',
  butler_title: 'Butler', faculty_state: '状态', commands: '命令', reports: '报告', report_failed: '报告不可用：{msg}',
  mcp_title: 'MCP', mcp_url: '把这个地址粘贴到你的 AI 客户端', copy: '复制', copied: '已复制。',
  providers: '提供方', provider: '提供方', namespace: '命名空间', state: '状态', tools: '工具',
  rejected_names: '被拒绝的名称', conflicts: '冲突', errors: '错误', last_error: '最近错误', none: '无',
  held_by: '由 {id} 持有', calls: '调用', host_tools: '主机自带工具', sessions: '会话',
  mcp_badge: 'MCP 服务 · {state}', mcp_view: 'MCP 视图',
  state_stopped: '已停止', state_starting: '启动中', state_running: '运行中', state_healthy: '健康',
  state_unhealthy: '不健康', state_backoff: '即将重启', state_restarting: '重启中', state_stopping: '停止中', state_crashed: '已崩溃', state_unmanaged: '未托管',
  state_idle: '未启动', state_ready: '就绪', state_failed: '失败', state_registered: '已注册',
  report_ok: '正常', report_attention: '需要关注', report_warn: '警告', report_error: '错误', report_unknown: '未知',
  job_outcome_ok: '成功', job_outcome_failed: '失败', job_distill: '蒸馏 · Butler',
  diagnostics_title: '目录诊断', diagnostics_empty: '所有清单都正常。',
  nav_settings: '设置', settings_title: '设置', settings_editor: '根配置（butler.json）',
  settings_owner_only: '设置只属于主人：请用登录链接打开控制台（`butler console`）。',
  settings_intro: '实例的根配置。保存后立即生效的部分：', settings_restart: '以下字段总要重启才生效：',
  settings_file_now: '文件当前的问题', settings_valid: '有效：主机会接受它。',
  settings_invalid: '{n} 个问题：修正之前不能保存。',
  settings_not_json: '不是 JSON：{msg}', settings_waiting: '运行中的主机在重启前保留这些字段的旧值：',
  settings_save: '保存', settings_revert: '还原', settings_saved: '已保存并生效。', settings_not_saved: '未保存。',
  settings_changed: '未保存：本页读取之后文件已被改动。请复制你的修改，重新打开此视图后再改。',
  report_list_empty: '暂无内容。',
  severity_error: '错误——未注册', severity_warning: '警告', severity_pending: '等待中',
  load_failed: '无法加载：{msg}',
};

const dictionaries = { en, zh };
let current = pick();

function pick() {
  let saved = null;
  try {
    saved = localStorage.getItem('butler.lang');
  } catch {
    saved = null;
  }
  if (saved === 'en' || saved === 'zh') return saved;
  const wanted = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || 'en'];
  for (const tag of wanted) {
    const lower = String(tag).toLowerCase();
    if (lower.startsWith('zh')) return 'zh';
    if (lower.startsWith('en')) return 'en';
  }
  return 'en';
}

export function lang() {
  return current;
}

export function setLang(next) {
  current = next === 'zh' ? 'zh' : 'en';
  try {
    localStorage.setItem('butler.lang', current);
  } catch {
    /* private mode: the choice lasts for this page */
  }
  document.documentElement.lang = current === 'zh' ? 'zh-CN' : 'en';
}

/** A run state (`stopped`, `ready`, …) in the console's language; one it does not know, as it is. */
export function stateText(state) {
  return has(`state_${state}`) ? t(`state_${state}`) : String(state ?? '');
}

/** A report's status (`ok`, `attention`, …) in the console's language; one it does not know, as it is. */
export function reportStatusText(status) {
  return has(`report_${status}`) ? t(`report_${status}`) : String(status ?? '');
}

/** An automation's last outcome in the console's language; one it does not know, as it is. */
export function jobOutcomeText(outcome) {
  return has(`job_outcome_${outcome}`) ? t(`job_outcome_${outcome}`) : String(outcome ?? '');
}

/**
 * The host's own automations by their registered title (their identity, in the faculty's
 * manifest): the title shown in the console's language. The owner's jobs keep theirs.
 */
const JOB_TITLES = { '蒸馏 · Butler': 'job_distill' };

/** An automation's title as shown: the host's own jobs in the console's language. */
export function jobTitle(title) {
  return Object.hasOwn(JOB_TITLES, title) ? t(JOB_TITLES[title]) : String(title ?? '');
}

function has(key) {
  return Object.hasOwn(en, key);
}

/** The text for `key`, with {name} placeholders filled from `vars`. */
export function t(key, vars = {}) {
  const text = dictionaries[current][key] ?? en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => (vars[name] === undefined ? '' : String(vars[name])));
}
