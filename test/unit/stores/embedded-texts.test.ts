// The Lua and SQL texts embedded in the build: the generated modules match lua/ and sql/ as they are now, and the scripts' SHAs are computed from them.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { EMBED_COMMAND, EMBEDDED, renderTexts, stripLuaComments } from '../../../scripts/embed-texts.js';
import { SQL_TEXTS } from '../../../src/stores/postgres/sql-texts.js';
import { assembleScript, loadScripts } from '../../../src/stores/redis/function-library.js';
import { LUA_TEXTS } from '../../../src/stores/redis/lua-texts.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');

describe('embedded Lua and SQL texts', () => {
  for (const texts of EMBEDDED) {
    it(`${texts.to} is what the generator writes from ${texts.from}/ now`, () => {
      const written = readFileSync(join(ROOT, texts.to), 'utf8');
      const expected = renderTexts(texts);
      if (written !== expected) {
        expect.fail(
          `${texts.to} is stale: ${texts.from}/ changed since it was generated. Run \`${EMBED_COMMAND}\``,
        );
      }
    });
  }

  it('holds every file of sql/ word for word, and of lua/ without its comments', () => {
    for (const [folder, extension, embedded, compact] of [
      ['lua', '.lua', LUA_TEXTS, stripLuaComments],
      ['sql', '.sql', SQL_TEXTS, (text: string) => text],
    ] as const) {
      const files = readdirSync(join(ROOT, folder)).filter((file) => file.endsWith(extension));
      expect(Object.keys(embedded).sort()).to.deep.equal(
        files.map((f) => f.slice(0, -extension.length)).sort(),
      );
      for (const file of files) {
        expect(embedded[file.slice(0, -extension.length)], file).to.equal(
          compact(readFileSync(join(ROOT, folder, file), 'utf8')),
        );
      }
    }
    for (const [name, text] of Object.entries(LUA_TEXTS)) {
      expect(
        text.split('\n').filter((line) => line.trim().startsWith('--')),
        name,
      ).to.deep.equal([]);
    }
  });

  it('strips Lua comments, keeping strings that hold -- and long strings with their blank lines', () => {
    const source = [
      '-- header',
      '',
      "local a = '--not a comment' -- a comment",
      'local b = "\\\\" .. "x--y" --[[ block',
      'still the block ]] local c = [==[',
      '',
      '-- kept ]==]',
      'return a--[[x]]..b',
      '',
    ].join('\n');
    expect(stripLuaComments(source)).to.equal(
      [
        "local a = '--not a comment'",
        'local b = "\\\\" .. "x--y"   local c = [==[',
        '',
        '-- kept ]==]',
        'return a ..b',
        '',
      ].join('\n'),
    );
  });

  it('a script carries the SHA1 of its own assembled source, which holds the modules it requires', () => {
    const scripts = loadScripts();
    for (const script of Object.values(scripts)) {
      expect(script.sha, script.name).to.equal(createHash('sha1').update(script.source).digest('hex'));
    }
    const check = assembleScript("return require('check')(KEYS, ARGV, 1, 1, #KEYS)");
    expect(scripts.check.source).to.equal(check);
    expect(check).to.include(LUA_TEXTS.check);
  });

  it('names the module when a script requires one that is not embedded', () => {
    expect(() => assembleScript("return require('no-such-module')")).to.throw(
      "no Lua module named 'no-such-module' (lua/no-such-module.lua)",
    );
  });
});
