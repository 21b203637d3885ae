"""NFKC of Arrow strings, normalising only the few characters that NFKC can change.

``pc.utf8_normalize`` runs every string through utf8proc's full decompose-and-recompose (about 70 MB/s),
yet nearly every character of web text is already NFKC: only the no-break spaces, ellipses, fullwidth
forms and the like change. This module finds those characters and normalises just the text around them.

Why the pieces give the same bytes. Call a code point *stable* when NFKC leaves it unchanged, and the first
code point of its NFKD decomposition is a starter (canonical combining class 0) that never combines with a
preceding character (it is never the second part of a canonical composition). Before a stable code point
nothing can reorder or compose across: ``NFKC(X + c + Y) == NFKC(X) + NFKC(c + Y)`` (UAX #15's
normalisation boundary), so a run of stable code points is its own NFKC. A text is therefore cut into its
stable runs and *segments*: each maximal run of unstable code points together with the code point just
before it (it may compose with the run: ``e`` + U+0301); only the segments go through
``pc.utf8_normalize``, and the text is their concatenation.

The table. :data:`STABLE` lists the non-ASCII code points assigned in Unicode 14 that are stable under the
installed Arrow; the normalisation stability policy keeps them stable in later versions. The tests derive
stability again from ``pc.utf8_normalize`` itself, for every code point, and check the table against it
(``python tests/curate/test_dedup_fast_paths.py`` prints the table again). :data:`SETTLED` marks the UTF-8
lead-and-second-byte pairs all of whose code points are stable, so most characters need no decoding.

Cost: one numpy pass over the bytes to find the non-ASCII characters, a table look-up for each, and
utf8proc on the segments only (a few bytes per unstable character).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_RANGES = """
80-9F A1-A7 A9 AB-AE B0-B1 B6-B7 BB BF-131 134-13E 141-148 14A-17E 180-1C3 1CD-1F0 1F4-2AF 2B9-2D7 2DE-2DF
2E5-2FF 34F 370-373 375-377 37B-37D 37F 386 388-38A 38C 38E-3A1 3A3-3CF 3D7-3EF 3F3 3F6-3F8 3FA-482 488-52F
531-556 559-586 588-58A 58D-58F 5BE 5C0 5C3 5C6 5D0-5EA 5EF-5F4 600-60F 61B-64A 660-66F 671-674 679-6D5
6DD-6DE 6E5-6E6 6E9 6EE-70D 70F-710 712-72F 74D-7B1 7C0-7EA 7F4-7FA 7FE-815 81A 824 828 830-83E 840-858 85E
860-86A 870-88E 890-891 8A0-8C9 8E2 900-93B 93D-94C 94E-950 955-957 960-983 985-98C 98F-990 993-9A8 9AA-9B0
9B2 9B6-9B9 9BD 9BF-9C4 9C7-9C8 9CB-9CC 9CE 9E0-9E3 9E6-9FD A01-A03 A05-A0A A0F-A10 A13-A28 A2A-A30 A32 A35
A38-A39 A3E-A42 A47-A48 A4B-A4C A51 A5C A66-A76 A81-A83 A85-A8D A8F-A91 A93-AA8 AAA-AB0 AB2-AB3 AB5-AB9
ABD-AC5 AC7-AC9 ACB-ACC AD0 AE0-AE3 AE6-AF1 AF9-AFF B01-B03 B05-B0C B0F-B10 B13-B28 B2A-B30 B32-B33 B35-B39
B3D B3F-B44 B47-B48 B4B-B4C B55 B5F-B63 B66-B77 B82-B83 B85-B8A B8E-B90 B92-B95 B99-B9A B9C B9E-B9F BA3-BA4
BA8-BAA BAE-BB9 BBF-BC2 BC6-BC8 BCA-BCC BD0 BE6-BFA C00-C0C C0E-C10 C12-C28 C2A-C39 C3D-C44 C46-C48 C4A-C4C
C58-C5A C5D C60-C63 C66-C6F C77-C8C C8E-C90 C92-CA8 CAA-CB3 CB5-CB9 CBD-CC1 CC3-CC4 CC6-CC8 CCA-CCC CDD-CDE
CE0-CE3 CE6-CEF CF1-CF2 D00-D0C D0E-D10 D12-D3A D3D D3F-D44 D46-D48 D4A-D4C D4E-D4F D54-D56 D58-D63 D66-D7F
D81-D83 D85-D96 D9A-DB1 DB3-DBB DBD DC0-DC6 DD0-DD4 DD6 DD8-DDE DE6-DEF DF2-DF4 E01-E32 E34-E37 E3F-E47
E4C-E5B E81-E82 E84 E86-E8A E8C-EA3 EA5 EA7-EB2 EB4-EB7 EBB-EBD EC0-EC4 EC6 ECC-ECD ED0-ED9 EDE-EDF F00-F0B
F0D-F17 F1A-F34 F36 F38 F3A-F42 F44-F47 F49-F4C F4E-F51 F53-F56 F58-F5B F5D-F68 F6A-F6C F7E-F7F F85 F88-F92
F94-F97 F99-F9C F9E-FA1 FA3-FA6 FA8-FAB FAD-FB4 FB6 FB8 FBA-FBC FBE-FC5 FC7-FCC FCE-FDA 1000-102D 102F-1036
1038 103B-108C 108E-10C5 10C7 10CD 10D0-10FB 10FD-1160 1176-11A7 11C3-1248 124A-124D 1250-1256 1258
125A-125D 1260-1288 128A-128D 1290-12B0 12B2-12B5 12B8-12BE 12C0 12C2-12C5 12C8-12D6 12D8-1310 1312-1315
1318-135A 1360-137C 1380-1399 13A0-13F5 13F8-13FD 1400-169C 16A0-16F8 1700-1713 171F-1733 1735-1736
1740-1753 1760-176C 176E-1770 1772-1773 1780-17D1 17D3-17DC 17E0-17E9 17F0-17F9 1800-1819 1820-1878
1880-18A8 18AA 18B0-18F5 1900-191E 1920-192B 1930-1938 1940 1944-196D 1970-1974 1980-19AB 19B0-19C9
19D0-19DA 19DE-1A16 1A19-1A1B 1A1E-1A5E 1A61-1A74 1A80-1A89 1A90-1A99 1AA0-1AAD 1ABE 1B00-1B33 1B36-1B43
1B45-1B4C 1B50-1B6A 1B74-1B7E 1B80-1BA9 1BAC-1BE5 1BE7-1BF1 1BFC-1C36 1C3B-1C49 1C4D-1C88 1C90-1CBA
1CBD-1CC7 1CD3 1CE1 1CE9-1CEC 1CEE-1CF3 1CF5-1CF7 1CFA 1D00-1D2B 1D2F 1D3B 1D4E 1D6B-1D77 1D79-1D9A
1E00-1E99 1E9C-1F15 1F18-1F1D 1F20-1F45 1F48-1F4D 1F50-1F57 1F59 1F5B 1F5D 1F5F-1F70 1F72 1F74 1F76 1F78
1F7A 1F7C 1F80-1FB4 1FB6-1FBA 1FBC 1FC2-1FC4 1FC6-1FC8 1FCA 1FCC 1FD0-1FD2 1FD6-1FDA 1FE0-1FE2 1FE4-1FEA
1FEC 1FF2-1FF4 1FF6-1FF8 1FFA 1FFC 200B-2010 2012-2016 2018-2023 2027-202E 2030-2032 2035 2038-203B 203D
203F-2046 204A-2056 2058-205E 2060-2064 2066-206F 20A0-20A7 20A9-20C0 20DD-20E0 20E2-20E4 2104 2108 2114
2117-2118 211E-211F 2123 2125 2127 2129 212E 2132 213A 2141-2144 214A-214F 2180-2188 218A-218B 2190-222B
222E 2231-2328 232B-2426 2440-244A 24EB-2A0B 2A0D-2A73 2A77-2ADB 2ADD-2B73 2B76-2B95 2B97-2C7B 2C7E-2CEE
2CF2-2CF3 2CF9-2D25 2D27 2D2D 2D30-2D67 2D70 2D80-2D96 2DA0-2DA6 2DA8-2DAE 2DB0-2DB6 2DB8-2DBE 2DC0-2DC6
2DC8-2DCE 2DD0-2DD6 2DD8-2DDE 2E00-2E5D 2E80-2E99 2E9B-2E9E 2EA0-2EF2 2FF0-2FFB 3001-3029 3030-3035 3037
303B-303F 3041-3096 309D-309E 30A0-30FE 3105-312F 3190-3191 31A0-31E3 31F0-31FF 3248-324F 327F 3400-A48C
A490-A4C6 A4D0-A62B A640-A66E A670-A673 A67E-A69B A6A0-A6EF A6F2-A6F7 A700-A76F A771-A7CA A7D0-A7D1 A7D3
A7D5-A7D9 A7F5-A7F7 A7FA-A805 A807-A82B A830-A839 A840-A877 A880-A8C3 A8C5 A8CE-A8D9 A8F2-A92A A92E-A952
A95F-A97C A980-A9B2 A9B4-A9BF A9C1-A9CD A9CF-A9D9 A9DE-A9FE AA00-AA36 AA40-AA4D AA50-AA59 AA5C-AAAF AAB1
AAB5-AAB6 AAB9-AABD AAC0 AAC2 AADB-AAF5 AB01-AB06 AB09-AB0E AB11-AB16 AB20-AB26 AB28-AB2E AB30-AB5B
AB60-AB68 AB6A-AB6B AB70-ABEC ABF0-ABF9 AC00-D7A3 D7B0-D7C6 D7CB-D7FB E000-F8FF FA0E-FA0F FA11 FA13-FA14
FA1F FA21 FA23-FA24 FA27-FA29 FBB2-FBC2 FD3E-FD4F FDCF FDFD-FE0F FE45-FE46 FE73 FEFF FFF9-FFFD 10000-1000B
1000D-10026 10028-1003A 1003C-1003D 1003F-1004D 10050-1005D 10080-100FA 10100-10102 10107-10133 10137-1018E
10190-1019C 101A0 101D0-101FC 10280-1029C 102A0-102D0 102E1-102FB 10300-10323 1032D-1034A 10350-10375
10380-1039D 1039F-103C3 103C8-103D5 10400-1049D 104A0-104A9 104B0-104D3 104D8-104FB 10500-10527 10530-10563
1056F-1057A 1057C-1058A 1058C-10592 10594-10595 10597-105A1 105A3-105B1 105B3-105B9 105BB-105BC 10600-10736
10740-10755 10760-10767 10780 10800-10805 10808 1080A-10835 10837-10838 1083C 1083F-10855 10857-1089E
108A7-108AF 108E0-108F2 108F4-108F5 108FB-1091B 1091F-10939 1093F 10980-109B7 109BC-109CF 109D2-10A03
10A05-10A06 10A0C 10A0E 10A10-10A13 10A15-10A17 10A19-10A35 10A40-10A48 10A50-10A58 10A60-10A9F 10AC0-10AE4
10AEB-10AF6 10B00-10B35 10B39-10B55 10B58-10B72 10B78-10B91 10B99-10B9C 10BA9-10BAF 10C00-10C48 10C80-10CB2
10CC0-10CF2 10CFA-10D23 10D30-10D39 10E60-10E7E 10E80-10EA9 10EAD 10EB0-10EB1 10F00-10F27 10F30-10F45
10F51-10F59 10F70-10F81 10F86-10F89 10FB0-10FCB 10FE0-10FF6 11000-11045 11047-1104D 11052-1106F 11071-11075
11080-110B8 110BB-110C2 110CD 110D0-110E8 110F0-110F9 11103-11126 11128-11132 11136-11147 11150-11172
11174-11176 11180-111BF 111C1-111C9 111CB-111DF 111E1-111F4 11200-11211 11213-11234 11237-1123E 11280-11286
11288 1128A-1128D 1128F-1129D 1129F-112A9 112B0-112E8 112F0-112F9 11300-11303 11305-1130C 1130F-11310
11313-11328 1132A-11330 11332-11333 11335-11339 1133D 1133F-11344 11347-11348 1134B-1134C 11350 1135D-11363
11400-11441 11443-11445 11447-1145B 1145D 1145F-11461 11480-114AF 114B1-114B9 114BB-114BC 114BE-114C1
114C4-114C7 114D0-114D9 11580-115AE 115B0-115B5 115B8-115BE 115C1-115DD 11600-1163E 11640-11644 11650-11659
11660-1166C 11680-116B5 116B8-116B9 116C0-116C9 11700-1171A 1171D-1172A 11730-11746 11800-11838 1183B
118A0-118F2 118FF-11906 11909 1190C-11913 11915-11916 11918-1192F 11931-11935 11937-11938 1193B-1193C
1193F-11942 11944-11946 11950-11959 119A0-119A7 119AA-119D7 119DA-119DF 119E1-119E4 11A00-11A33 11A35-11A46
11A50-11A98 11A9A-11AA2 11AB0-11AF8 11C00-11C08 11C0A-11C36 11C38-11C3E 11C40-11C45 11C50-11C6C 11C70-11C8F
11C92-11CA7 11CA9-11CB6 11D00-11D06 11D08-11D09 11D0B-11D36 11D3A 11D3C-11D3D 11D3F-11D41 11D43 11D46-11D47
11D50-11D59 11D60-11D65 11D67-11D68 11D6A-11D8E 11D90-11D91 11D93-11D96 11D98 11DA0-11DA9 11EE0-11EF8 11FB0
11FC0-11FF1 11FFF-12399 12400-1246E 12470-12474 12480-12543 12F90-12FF2 13000-1342E 13430-13438 14400-14646
16800-16A38 16A40-16A5E 16A60-16A69 16A6E-16ABE 16AC0-16AC9 16AD0-16AED 16AF5 16B00-16B2F 16B37-16B45
16B50-16B59 16B5B-16B61 16B63-16B77 16B7D-16B8F 16E40-16E9A 16F00-16F4A 16F4F-16F87 16F8F-16F9F 16FE0-16FE4
17000-187F7 18800-18CD5 18D00-18D08 1AFF0-1AFF3 1AFF5-1AFFB 1AFFD-1AFFE 1B000-1B122 1B150-1B152 1B164-1B167
1B170-1B2FB 1BC00-1BC6A 1BC70-1BC7C 1BC80-1BC88 1BC90-1BC99 1BC9C-1BC9D 1BC9F-1BCA3 1CF00-1CF2D 1CF30-1CF46
1CF50-1CFC3 1D000-1D0F5 1D100-1D126 1D129-1D15D 1D16A-1D16C 1D173-1D17A 1D183-1D184 1D18C-1D1A9 1D1AE-1D1BA
1D1C1-1D1EA 1D200-1D241 1D245 1D2E0-1D2F3 1D300-1D356 1D360-1D378 1D800-1DA8B 1DA9B-1DA9F 1DAA1-1DAAF
1DF00-1DF1E 1E100-1E12C 1E137-1E13D 1E140-1E149 1E14E-1E14F 1E290-1E2AD 1E2C0-1E2EB 1E2F0-1E2F9 1E2FF
1E7E0-1E7E6 1E7E8-1E7EB 1E7ED-1E7EE 1E7F0-1E7FE 1E800-1E8C4 1E8C7-1E8CF 1E900-1E943 1E94B 1E950-1E959
1E95E-1E95F 1EC71-1ECB4 1ED01-1ED3D 1EEF0-1EEF1 1F000-1F02B 1F030-1F093 1F0A0-1F0AE 1F0B1-1F0BF 1F0C1-1F0CF
1F0D1-1F0F5 1F10B-1F10F 1F12F 1F150-1F169 1F16D-1F18F 1F191-1F1AD 1F1E6-1F1FF 1F260-1F265 1F300-1F6D7
1F6DD-1F6EC 1F6F0-1F6FC 1F700-1F773 1F780-1F7D8 1F7E0-1F7EB 1F7F0 1F800-1F80B 1F810-1F847 1F850-1F859
1F860-1F887 1F890-1F8AD 1F8B0-1F8B1 1F900-1FA53 1FA60-1FA6D 1FA70-1FA74 1FA78-1FA7C 1FA80-1FA86 1FA90-1FAAC
1FAB0-1FABA 1FAC0-1FAC5 1FAD0-1FAD9 1FAE0-1FAE7 1FAF0-1FAF6 1FB00-1FB92 1FB94-1FBCA 20000-2A6DF 2A700-2B738
2B740-2B81D 2B820-2CEA1 2CEB0-2EBE0 30000-3134A E0001 E0020-E007F E0100-E01EF F0000-FFFFD 100000-10FFFD
"""


def _table() -> np.ndarray:
    table = np.zeros(0x110000, dtype=bool)
    table[:0x80] = True
    for item in _RANGES.split():
        lo, _, hi = item.partition("-")
        table[int(lo, 16):int(hi or lo, 16) + 1] = True
    return table


STABLE = _table()
"""``STABLE[c]``: code point ``c`` is stable (ASCII included)."""


def _prefixes() -> np.ndarray:
    """``SETTLED[b0 << 8 | b1]``: every code point whose UTF-8 starts with bytes ``b0 b1`` is stable."""
    settled = np.zeros(1 << 16, dtype=bool)
    b1 = np.arange(0x80, 0xC0)
    for b0 in range(0xC2, 0xF5):
        if b0 < 0xE0:
            ok = STABLE[(b0 & 0x1F) << 6 | (b1 & 0x3F)]
        elif b0 < 0xF0:
            ok = STABLE[:0x10000].reshape(-1, 64).all(axis=1)[(b0 & 0x0F) << 6 | (b1 & 0x3F)]
        else:
            blocks = STABLE.reshape(-1, 4096).all(axis=1)  # 272 blocks: F4 90 and above is not UTF-8
            ok = blocks[np.minimum((b0 & 0x07) << 6 | (b1 & 0x3F), len(blocks) - 1)]
        settled[b0 << 8 | b1] = ok
    return settled


SETTLED = _prefixes()


def nfkc(texts: pa.Array) -> pa.Array:
    """``pc.utf8_normalize(texts, form="NFKC")`` for strings without nulls, normalising segments only."""
    strings = texts.cast(pa.large_string())
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
    data = strings.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    start, end = _segments(raw, offsets)
    if not len(start):
        return texts
    cuts = np.sort(np.concatenate([offsets, start, end]))
    cuts = cuts[np.concatenate([[True], cuts[1:] != cuts[:-1]])]
    pieces = pa.LargeStringArray.from_buffers(len(cuts) - 1, pa.py_buffer(cuts), data)
    where = np.searchsorted(cuts, start)
    mask = np.zeros(len(pieces), dtype=bool)
    mask[where] = True
    normed = pc.utf8_normalize(pieces.take(pa.array(where)), form="NFKC")
    joined = pc.replace_with_mask(pieces, pa.array(mask), normed)
    new = np.frombuffer(joined.buffers()[1], dtype=np.int64)[joined.offset:joined.offset + len(joined) + 1]
    out = pa.LargeStringArray.from_buffers(len(strings), pa.py_buffer(new[np.searchsorted(cuts, offsets)]),
                                           joined.buffers()[2])
    return out.cast(texts.type)


def _segments(raw: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte ranges ``[start, end)`` of the segments to normalise: each maximal run of unstable code points
    within one text, from the code point before it (when the text has one)."""
    lo, hi = int(offsets[0]), int(offsets[-1])
    body = raw[lo:hi]
    lead = np.flatnonzero(body >= 0xC0) + lo  # the first byte of every non-ASCII code point
    lead = lead[~SETTLED[raw[lead].astype(np.int64) << 8 | raw[lead + 1]]]
    code, size = _decode(raw, lead)
    bad = ~STABLE[code]
    pos, end = lead[bad], lead[bad] + size[bad]
    if not len(pos):
        return pos, pos
    text = np.searchsorted(offsets, pos, side="right") - 1
    first = np.concatenate([[True], (pos[1:] != end[:-1]) | (text[1:] != text[:-1])])
    last = np.concatenate([first[1:], [True]])
    start, stop, text = pos[first], end[last], text[first]
    before = start - 1
    for _ in range(3):  # back over the continuation bytes of the code point before the run
        before = np.where((raw[before] & 0xC0) == 0x80, before - 1, before)
    return np.where(start > offsets[text], before, start), stop


def _decode(raw: np.ndarray, lead: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Code point and byte length of the UTF-8 sequences starting at ``lead`` (valid UTF-8, non-ASCII)."""
    b0, b1, b2, b3 = (raw[np.minimum(lead + k, len(raw) - 1)].astype(np.int64) for k in range(4))
    size = 2 + (b0 >= 0xE0) + (b0 >= 0xF0)
    two = (b0 & 0x1F) << 6 | (b1 & 0x3F)
    three = (b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F)
    four = (b0 & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F)
    return np.select([size == 2, size == 3], [two, three], four), size
