//! The words people use for what tools do, beside the words tools use for it: groups of
//! English and Chinese words for one action or thing (reading, a folder, a pull request, a
//! screenshot…). A request that says one word of a group is also searched for the group's
//! English words, at a lower weight than its own words — so "open notes.txt and show me
//! what it says" meets `read_file`, and "把这个网页截个图" meets `take_screenshot`, whose
//! descriptions share no word with them. The groups are about tools in general (files,
//! code hosting, browsers, the web, data stores, messages, tasks, time, places), never about
//! one server's tools; English stop words are left out of requests.

/// The groups: each a list of words, English (matched as whole words, stemmed) and
/// Chinese (matched anywhere in the request). An English entry of several words is only
/// searched for, never matched: "pull request" is what `pr` and `合并请求` lead to, while a
/// request to "pull the numbers" is no pull request.
pub(super) const GROUPS: &[&[&str]] = &[
    // Reading and showing.
    &[
        "read",
        "get",
        "view",
        "show",
        "display",
        "contents",
        "content",
        "读",
        "读取",
        "查看",
        "看看",
        "看一下",
        "内容",
        "显示",
        "打开",
    ],
    &["write", "save", "store", "写", "写入", "保存", "存到", "存成", "存一下"],
    &["file", "files", "document", "文件", "文档"],
    &["directory", "folder", "dir", "目录", "文件夹"],
    &["list", "all", "every", "which", "enumerate", "列出", "列表", "哪些", "所有", "都有", "全部"],
    &["delete", "remove", "drop", "erase", "clear", "删除", "删掉", "移除", "清除", "清空", "去掉"],
    &["create", "new", "make", "add", "新建", "创建", "建一个", "添加", "新增", "建个"],
    &["search", "find", "look", "lookup", "query", "搜索", "查找", "找", "搜", "查询", "查一下", "检索"],
    &["move", "rename", "移动", "挪", "重命名", "改名"],
    &["edit", "change", "modify", "replace", "update", "修改", "改成", "编辑", "替换", "更新", "改一下"],
    &["tree", "structure", "目录树", "结构"],
    &["size", "info", "information", "metadata", "modified", "大小", "多大", "信息", "修改时间"],
    &["allowed", "access", "permission", "允许", "权限"],
    // Running things.
    &[
        "run", "execute", "start", "launch", "command", "shell", "terminal", "运行", "执行", "跑", "启动", "命令",
        "终端",
    ],
    &["process", "processes", "session", "进程", "会话"],
    &["terminate", "kill", "stop", "end", "cancel", "结束", "杀掉", "终止", "停止", "关掉", "取消"],
    &["output", "result", "输出", "结果"],
    // Code hosting.
    &["repository", "repo", "repos", "project", "仓库", "代码库", "项目"],
    &["branch", "branches", "分支"],
    &["commit", "commits", "history", "提交", "历史"],
    &["pull request", "pr", "merge", "拉取请求", "合并请求", "合并"],
    &["issue", "issues", "ticket", "bug", "问题", "工单", "缺陷"],
    &["comment", "reply", "comments", "评论", "回复", "留言"],
    &["review", "reviewer", "审查", "评审", "审核"],
    &["diff", "difference", "compare", "changes", "差异", "对比", "比较", "改动", "改了"],
    &["status", "state", "状态"],
    &["stage", "staged", "暂存"],
    &["code", "source", "snippet", "代码", "源码"],
    // Browsers and the web.
    &["screenshot", "capture", "snap", "image", "截图", "截屏", "截个图"],
    &[
        "page", "web", "webpage", "site", "website", "url", "link", "网页", "页面", "网站", "网址", "链接", "上网",
        "网上",
    ],
    &["browser", "tab", "tabs", "浏览器", "标签页"],
    &["navigate", "go", "visit", "goto", "open", "访问", "跳转", "打开"],
    &["click", "press", "tap", "button", "点击", "点一下", "按钮", "按下", "回车"],
    &["type", "fill", "input", "enter", "form", "输入", "填", "填写", "表单"],
    &["hover", "mouse", "鼠标", "悬停", "移到"],
    &["select", "option", "dropdown", "choose", "选择", "下拉", "选项"],
    &["dialog", "alert", "confirm", "prompt", "弹窗", "对话框", "确认框", "弹了"],
    &["wait", "appear", "等", "等待", "出现"],
    &["evaluate", "javascript", "script", "js", "脚本"],
    &["console", "log", "logs", "控制台", "日志"],
    &["network", "requests", "api", "calls", "网络", "请求", "接口"],
    &["upload", "attach", "attachment", "上传", "附件"],
    &["download", "下载"],
    &["scrape", "crawl", "extract", "fetch", "抓取", "爬", "爬取", "提取", "抓"],
    &["map", "urls", "sitemap", "地图"],
    &["performance", "trace", "profile", "slow", "speed", "性能", "慢", "卡"],
    &["resize", "viewport", "width", "mobile", "emulate", "尺寸", "手机", "宽度"],
    &["back", "previous", "返回", "后退"],
    &["news", "新闻"],
    &["research", "report", "研究", "报告"],
    // Data stores.
    &["database", "db", "数据库"],
    &["table", "tables", "collection", "schema", "表", "数据表", "集合", "结构"],
    &["record", "records", "row", "rows", "entry", "documents", "记录", "条目", "数据"],
    &["sql", "statement", "语句"],
    &["key", "keys", "value", "cache", "键", "值", "缓存"],
    &["count", "number", "how", "many", "多少", "数量", "几个"],
    &["index", "indexes", "索引"],
    // Messages, tasks, notes, knowledge.
    &["message", "messages", "chat", "send", "post", "消息", "发送", "发", "说一声", "通知"],
    &["channel", "channels", "频道", "群"],
    &["task", "tasks", "todo", "任务", "待办"],
    &["due", "deadline", "date", "schedule", "日期", "截止", "到期", "明天", "今天"],
    &["user", "users", "member", "people", "用户", "成员", "同事"],
    &["note", "notes", "vault", "笔记"],
    &["memory", "remember", "entity", "entities", "knowledge", "graph", "observation", "记住", "记忆", "知识"],
    &["paper", "papers", "article", "arxiv", "论文", "文章"],
    &["documentation", "docs", "library", "api", "文档", "库", "用法"],
    &["label", "labels", "tag", "tags", "标签"],
    &["email", "mail", "邮件", "邮箱"],
    &["picture", "photo", "image", "images", "图片", "图像", "照片"],
    &["summary", "summarize", "总结", "摘要"],
    &["think", "reason", "step", "plan", "思考", "推理", "一步一步"],
    // Time and places.
    &["time", "clock", "now", "current", "时间", "几点", "现在", "当前"],
    &["timezone", "zone", "时区"],
    &["convert", "translate", "转换", "换算"],
    &["place", "places", "location", "address", "nearby", "地点", "地址", "附近"],
    &["directions", "route", "distance", "路线", "怎么走", "距离"],
    // Operations.
    &["pod", "pods", "deployment", "kubernetes", "cluster", "container", "containers", "集群", "容器"],
    &["error", "errors", "exception", "failure", "错误", "报错", "异常"],
    &["metric", "metrics", "alarm", "alarms", "指标", "告警"],
    &["rollback", "rollout", "undo", "revert", "回滚", "撤销", "还原"],
    &["context", "switch", "上下文", "切换"],
    &["deploy", "deployment", "release", "version", "部署", "发布", "版本"],
    &["migration", "migrate", "迁移"],
    &["cost", "costs", "price", "pricing", "estimate", "费用", "成本", "价格", "多少钱", "估算"],
    // Words a request says of what it wants done, across kinds of tools.
    &["subtask", "subtasks", "子任务"],
    &["complete", "completed", "done", "finish", "完成", "做完"],
    &["recent", "recently", "latest", "最近", "最新"],
    &["field", "fields", "column", "columns", "property", "字段", "列", "属性"],
    &["hash", "哈希"],
    &["expire", "expired", "ttl", "过期"],
    &["citation", "citations", "cite", "cited", "引用"],
    &["subscribe", "subscription", "watch", "alert", "alerts", "订阅", "关注", "提醒"],
    &["coordinate", "coordinates", "geocode", "latitude", "longitude", "坐标", "经纬度"],
    &["reaction", "emoji", "react", "表情", "点赞"],
    &["views", "viewed", "analytics", "浏览", "看过", "访问量"],
    &["workspace", "worktree", "working", "工作区"],
    &["template", "templates", "模板"],
    &["profile", "资料", "简介"],
];

/// English words a request is not searched for: they say nothing of what a tool does.
pub(super) const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "could", "do", "does", "for", "from", "give",
    "had", "has", "have", "he", "her", "here", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "of",
    "on", "or", "our", "please", "she", "so", "some", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "those", "to", "up", "us", "was", "we", "were", "what", "when", "where", "will", "with", "would", "you",
    "your",
];
