"""The salience gate's rules: the word lists it matches (lower case; Latin phrases whole words, an optional plural
"s"), the normal form a message is matched in, and the lists compiled into regexes (`rules_for`). What a match
adds to a turn's score is `salience`'s."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.memory import SalienceConfig

CHITCHAT = (
    "ok, okay, okey, okie, k, kk, alright, all right, sure, cool, nice, great, good, fine, awesome, perfect, thanks, "
    "thank you, thank u, thx, ty, tysm, youre welcome, welcome, np, no problem, no worries, hi, hello, hey, hiya, yo, "
    "bye, goodbye, good night, goodnight, gn, good morning, morning, night, see you, see ya, cya, later, got it, "
    "i see, sounds good, makes sense, hmm, hm, mm, mhm, uh, um, oh, ah, aw, aww, wow, yay, oops, so, very, much, too, "
    "a lot, really, indeed, please, pls, plz, me too, same, im fine, i am fine, not bad, yes, yeah, yep, yup, ya, "
    "no, nope, nah, "
    "嗯, 恩, 哦, 噢, 喔, 啊, 呀, 吧, 呢, 啦, 了, 嘛, 好的, 好吧, 好, 行, 可以, 没问题, 谢谢, 多谢, 谢啦, 感谢, "
    "晚安, 早安, 早上好, 早, 你好, 拜拜, 再见, 收到, 知道了, 明白, 对, 是的, 是啊, 对啊, 没事, 不客气, 辛苦了, "
    "太好了, 不错, 酷"
)
LAUGHTER = r"(?<![a-z])(?:(?:a?h[ae]){2,}h?|l+o+l+|lmao|rofl|x+d+|hehe+)(?![a-z])|[哈呵嘿嘻嗯]+"

LIFE_EVENTS = (
    "job, work, career, interview, hired, fired, laid off, promotion, promoted, quit, resign, boss, salary, "
    "exam, finals, test results, graduate, graduation, school, university, college, degree, thesis, "
    "move, moving, moved, relocate, apartment, new house, break up, broke up, breakup, divorce, married, "
    "marry, wedding, engaged, pregnant, baby, born, died, death, passed away, funeral, sick, ill, hospital, "
    "surgery, diagnosed, diagnosis, allergy, allergies, allergic, diet, vegetarian, vegan, medication, "
    "therapy, therapist, doctor, appointment, birthday, anniversary, holiday, vacation, trip, travel, flight, "
    "retire, retired, retirement, deadline, girlfriend, boyfriend, wife, husband, partner, mom, mother, dad, "
    "father, sister, brother, son, daughter, kid, child, children, friend, dog, cat, pet, remind, promise, "
    "工作, 上班, 面试, 辞职, 离职, 失业, 裁员, 升职, 加薪, 老板, 考试, 考研, 高考, 期末, 毕业, 学校, 大学, 论文, "
    "搬家, 搬到, 分手, 离婚, 结婚, 婚礼, 订婚, 怀孕, 宝宝, 孩子, 去世, 葬礼, 生病, 住院, 医院, 手术, 过敏, 吃药, "
    "医生, 预约, 生日, 纪念日, 假期, 旅行, 出差, 退休, 截止, 男朋友, 女朋友, 老婆, 老公, 妈妈, 爸爸, 姐姐, 妹妹, "
    "哥哥, 弟弟, 儿子, 女儿, 朋友, 猫, 狗, 宠物, 提醒, 答应"
)
EMOTIONS = (
    "sad, unhappy, happy, angry, mad, upset, anxious, anxiety, worried, worry, nervous, scared, afraid, stressed, "
    "stress, depressed, lonely, excited, frustrated, exhausted, hurt, cry, crying, cried, hate, miss, proud, "
    "ashamed, embarrassed, overwhelmed, heartbroken, grateful, jealous, terrified, devastated, "
    "难过, 伤心, 开心, 高兴, 生气, 焦虑, 担心, 紧张, 害怕, 压力, 抑郁, 孤独, 寂寞, 兴奋, 沮丧, 哭, 讨厌, 想念, "
    "骄傲, 崩溃, 烦, 郁闷, 失望, 委屈, 感动, 难受, 心累"
)
PREFERENCES = (
    r"(?<![a-z])i (?:really )?(?:like|love|hate|prefer|enjoy|dislike|adore|cant stand)(?![a-z])|"
    r"(?<![a-z])favou?rites?(?![a-z])|(?<![a-z])(?:allergic|intolerant) to(?![a-z])|"
    r"我(?:很|最|超|特别|真的)?(?:喜欢|爱|讨厌|不喜欢|受不了)|最喜欢|我不吃|我不能吃"
)
ABOUT_USER = (
    r"(?<![a-z])(?:my|mine|im|i am|ive|i have|i live|i work|i was|i got|i will|ill|i need|i want|i feel)(?![a-z])|"
    r"我(?:是|叫|住|在|的|有|要|想|会|得|们)"
)
RECALL_QUESTIONS = (
    "do you remember, you remember, remember when, remember what, did i tell you, did i mention, what did i say, "
    "what did i tell you, i told you, i mentioned, last time, you said, we talked about, we discussed, as i said, "
    "like i said, 上次, 还记得, 记得吗, 记不记得, 你记得, 我说过, 跟你说过, 告诉过你, 之前说, 以前说, 你说过, "
    "我们聊过, 提过"
)
SPECIFICS = (
    r"\d|(?<![a-z])(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|june|"
    r"july|august|september|october|november|december|tomorrow|tonight|yesterday|weekend|next (?:week|month|year)|"
    r"last (?:week|month|year))(?![a-z])|明天|后天|昨天|前天|今晚|下周|上周|下个月|上个月|明年|去年|周末|星期|礼拜|"
    r"周[一二三四五六日天]|[一二三四五六七八九十]+[月号]"
)
NAME = re.compile(r"(?<=[^.!?\s]\s)[A-Z][a-z]+")  # a capitalised word that does not start a sentence


def _phrases(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def normalize(text: str) -> str:
    """Lower case, NFKC, apostrophes dropped ("I'm" → "im"), anything but letters and digits turned to single
    spaces: what the word lists match against."""
    text = unicodedata.normalize("NFKC", text).lower().replace("'", "").replace("\u2019", "")
    kept = "".join(c if unicodedata.category(c)[0] in "LN" else " " for c in text)
    return " ".join(kept.split())


def alternation(phrases: Iterable[str], plural: bool = False, *, grouped: bool = True) -> str:
    """One regex for many phrases; a Latin phrase matches whole words only (optionally plural).

    The Latin phrases share one word-boundary check around a group of them (`grouped`): the same matches, spans
    and order of trial as one check per phrase, at about a tenth of the time (the lookbehind in front of every
    alternative kept re from scanning fast; the word lists are long; bench/turn_cost.py measures it).
    `PAGEMIND_TURN_SHORTCUTS=off` (read at each turn, in `rules_for`) builds the per-phrase form."""
    latin: list[str] = []
    other: list[str] = []
    for phrase in sorted({normalize(p) for p in phrases if normalize(p)}, key=len, reverse=True):
        (latin if phrase[0].isascii() else other).append(re.escape(phrase))
    suffix = "(?:s|es)?" if plural else ""
    if not grouped:
        return "|".join([rf"(?<![a-z0-9]){body}{suffix}(?![a-z0-9])" for body in latin] + other) or r"(?!x)x"
    # A Latin phrase and another cannot start at the same place (an ASCII first character or not), so putting
    # the Latin group first changes no match.
    group = [rf"(?<![a-z0-9])(?:{'|'.join(latin)}){suffix}(?![a-z0-9])"] if latin else []
    return "|".join(group + other) or r"(?!x)x"


@dataclass(frozen=True)
class Rules:
    """The compiled word lists: chit-chat (removed before scoring) and each signal's pattern."""

    chitchat: re.Pattern[str]
    signals: tuple[tuple[str, re.Pattern[str]], ...]  # (weight name, pattern), in the order reasons are given


def rules_for(config: SalienceConfig) -> Rules:
    """The compiled rules for `config`'s own words, in the form `PAGEMIND_TURN_SHORTCUTS` asks for now."""
    return _rules(tuple(config.keywords), tuple(config.chitchat), Settings.read("turn_shortcuts") != "off")


@lru_cache(maxsize=64)
def _rules(keywords: tuple[str, ...], chitchat: tuple[str, ...], grouped: bool) -> Rules:
    def form(phrases: Iterable[str], plural: bool = False) -> str:
        return alternation(phrases, plural, grouped=grouped)

    return Rules(
        chitchat=re.compile(f"{form([*_phrases(CHITCHAT), *chitchat])}|{LAUGHTER}"),
        signals=(
            ("recall_question", re.compile(form(_phrases(RECALL_QUESTIONS)))),
            ("life_event", re.compile(form([*_phrases(LIFE_EVENTS), *keywords], plural=True))),
            ("emotion", re.compile(form(_phrases(EMOTIONS), plural=True))),
            ("preference", re.compile(PREFERENCES)),
            ("about_user", re.compile(ABOUT_USER)),
            ("specifics", re.compile(SPECIFICS)),
        ),
    )
