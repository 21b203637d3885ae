"""A chat template file that is not UTF-8 is a ``TemplateError`` naming the file and the byte offset."""

from __future__ import annotations

import pytest

from tokenmill.errors import TemplateError
from tokenmill.sft.template import load_template

TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"


@pytest.mark.parametrize("name", ["chat.jinja", "tokenizer_config.json"])
def test_a_template_file_that_is_not_utf8_names_the_byte(tmp_path, name):
    path = tmp_path / name
    text = TEMPLATE if name.endswith(".jinja") else '{"chat_template": "' + TEMPLATE + '"}'
    path.write_bytes(text.encode() + "{# é #}".encode("latin-1"))
    with pytest.raises(TemplateError) as err:
        load_template(str(path))
    offset = len(text.encode()) + 3
    assert str(err.value) == f"{path}: the chat template is not UTF-8 text (byte offset {offset}: b'\\xe9'); save it as UTF-8"
    if name == "tokenizer_config.json":  # a tokenizer directory holding it: the same error
        with pytest.raises(TemplateError, match=f"tokenizer_config.json: the chat template is not UTF-8 text "
                                                f"\\(byte offset {offset}"):
            load_template(str(tmp_path))
