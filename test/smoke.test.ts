import t from 'tap';
t.equal(1 + 1, 2, 'adds');
t.test('sub', async (t) => { t.ok(true); t.equal(2, 2); });
